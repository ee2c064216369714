"""on_error="skip" in Python and on Dask: the instances that fail (an item that is no instance of the
entry's type, a word id out of range, an empty list gathered) are left out and reported by their
index in the whole collection, and the others' outputs are those of a run of the good ones alone;
on_error="raise" (the default) fails the call naming the first.

Run from the repository root with PYTHONPATH=build/python (ctest's python.pytest does)."""

import os

import numpy as np
import pytest

import acrobat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREELSTM = os.path.join(ROOT, "models", "treelstm.acr")
BERXIT = os.path.join(ROOT, "models", "berxit.acr")
TEST = os.path.join(ROOT, "data", "sst", "test.txt")
BAD = {3: {"Leaf": ["x"]}, 11: {"Leaf": [10 ** 8]}, 18: {"Node": [{"Leaf": [1]}, {"Leaf": [-1]}]}}


def with_bad(values):
    return [BAD.get(i, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("engine", ["batched", "aot", "reference"])
def test_run_skips_the_instances_that_fail(engine):
    m = acrobat.load(TREELSTM, dims={"H": 8}, engine=engine, threads=1)
    values = m.read_values("sst:" + TEST, limit=24)
    with pytest.raises(acrobat.Error, match="instance 3: "):
        m.run(with_bad(values), batch=8)
    outputs, stats = m.run(with_bad(values), batch=8, on_error="skip", first_index=100)
    assert [f["instance"] for f in stats["failures"]] == [103, 111, 118]
    assert "instance 111: index 100000000 is out of range" in stats["failures"][1]["error"]
    assert "instance 103: " in stats["failures"][0]["error"]
    good = [v for i, v in enumerate(values) if i not in BAD]
    want, _ = m.run(good, batch=8)
    got = [o for i, o in enumerate(outputs) if i not in BAD]
    assert len(outputs) == 24 and all(outputs[i] is None for i in BAD)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(acrobat.Error, match="on_error='ignore'"):
        m.run(values, on_error="ignore")


def test_an_epoch_skips_the_instances_that_fail():
    m = acrobat.load(BERXIT, dims={"L": 2})
    rng = np.random.RandomState(0)
    data = [[[[1.0, 0.0, 0.0]], [int(w) for w in rng.randint(1, 500, 1 + i % 5)]] for i in range(20)]
    data[6][1] = []
    data[13][1] = []
    t = m.trainer(lr=1e-2, seed=0)
    with pytest.raises(acrobat.Error, match="gathered by an empty list"):
        t.epoch(data, batch=20)
    r = m.trainer(lr=1e-2, seed=0).epoch(data, batch=20, on_error="skip")
    assert [s["instance"] for s in r["skipped"]] == [6, 13] and r["instances"] == 18
    assert "instance 13: param 'emb' gathered by an empty list" in r["skipped"][1]["error"]
    good = [d for i, d in enumerate(data) if i not in (6, 13)]
    m2 = acrobat.load(BERXIT, dims={"L": 2})
    want = m2.trainer(lr=1e-2, seed=0).epoch(good, batch=20)
    np.testing.assert_allclose(r["mean_loss"], want["mean_loss"], rtol=1e-5)
    for name in m.param_names:
        np.testing.assert_allclose(m.params[name], m2.params[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_dask_skips_the_instances_that_fail_across_partitions():
    import dask
    import dask.bag as dask_bag

    import acrobat.dask

    values = acrobat.load(TREELSTM, dims={"H": 8}).read_values("sst:" + TEST, limit=40)
    values = values[:33] + [{"Leaf": [10 ** 8]}] + values[34:37] + [{"Leaf": ["x"]}] + values[38:]
    bag = dask_bag.from_sequence(values, partition_size=8)
    with dask.config.set(scheduler="sync"):
        with pytest.raises(acrobat.Error, match="instance 3[37]: "):
            acrobat.dask.map_batches(bag, TREELSTM, dims={"H": 8}, batch=4).compute()
        outputs = acrobat.dask.map_batches(bag, TREELSTM, dims={"H": 8}, batch=4, on_error="skip").compute()
    assert len(outputs) == 40
    skipped = [(i, o) for i, o in enumerate(outputs) if isinstance(o, acrobat.dask.Skipped)]
    assert [i for i, _ in skipped] == [33, 37] and [o.instance for _, o in skipped] == [33, 37]
    assert "instance 33: index 100000000 is out of range" in skipped[0][1].error
    want, _ = acrobat.load(TREELSTM, dims={"H": 8}).run(values[:33], batch=4)
    for a, b in zip(outputs[:32], want[:32]):
        np.testing.assert_array_equal(a, b)


LOOP = """def spin(k: int) -> int { if k == 0 { 0 } else { spin(k + 1) } }
def main(k: int) -> int { if k > 0 { spin(k) } else { 7 - k } }
"""


@pytest.mark.parametrize("engine", ["batched", "aot", "reference"])
def test_a_step_budget_stops_a_loop_that_never_ends(engine):
    m = acrobat.loads(LOOP, name="loop.acr", engine=engine, threads=1, max_steps=10000)
    with pytest.raises(acrobat.Error, match=r"loop.acr:1:50: error: instance 1: more than 10000 calls .* of 'spin'"):
        m.run([0, 3, -1])
    outputs, stats = m.run([0, 3, -1], on_error="skip")
    assert outputs == [7, None, 8] and [f["instance"] for f in stats["failures"]] == [1]
    for bad in (-1, "x", 2 ** 60):
        with pytest.raises(acrobat.Error, match="max_steps"):
            acrobat.loads(LOOP, engine=engine, max_steps=bad)
