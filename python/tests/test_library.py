"""The package as a Python library: no deadlock whatever a callback or another thread does, one
rule for params (copied in, read-only out, strict names), Instances as a sequence with labels,
errors in Python's words with instances counted from 0 (also across a Dask bag's partitions), and
the package's version and type information.

Run from the repository root with PYTHONPATH=build/python (ctest's python.pytest does)."""

import inspect
import json
import os
import re
import subprocess
import sys
import typing

import numpy as np
import pytest

import acrobat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("ACROBAT_BIN", os.path.join(ROOT, "build", "tools", "acrobat"))
TREELSTM = os.path.join(ROOT, "models", "treelstm.acr")
TEST = os.path.join(ROOT, "data", "sst", "test.txt")
TRAIN = os.path.join(ROOT, "data", "sst", "train.txt")


def run_isolated(code, timeout=300):
    """`code` in a fresh interpreter (a deadlock holds the GIL, so it cannot be timed out from a thread
    of this one); its last line of output as JSON. A timeout fails the test instead of hanging it."""
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(acrobat.__file__))))
    except subprocess.TimeoutExpired:
        pytest.fail("no answer within %d s: a deadlock" % timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


TRAINING = """
import json, threading, numpy as np, acrobat
def model():
    return acrobat.load(%r, dims={"H": 16}, threads=1, seed=4)
m = model()
train = m.read_inputs("sst:" + %r, entry="loss", limit=120)
dev = m.read_inputs("sst:" + %r, limit=20)
""" % (TREELSTM, TRAIN, TEST)


def test_a_progress_callback_may_run_the_model_and_leaves_the_epoch_unchanged():
    out = run_isolated(TRAINING + """
seen = []
def progress(done, loss, seconds):
    seen.append((done, m.engine, m.accuracy(dev), len(m.run(dev, batch=8)[0])))
with_cb = m.trainer(seed=2).epoch(train, batch=25, progress=progress)
quiet = model()
without = quiet.trainer(seed=2).epoch(quiet.read_inputs("sst:" + %r, entry="loss", limit=120), batch=25)
same = all(np.array_equal(a, quiet.params[k]) for k, a in m.params.items())
print(json.dumps({"seen": seen, "losses": [with_cb["batch_losses"], without["batch_losses"]], "same": same}))
""" % TRAIN)
    assert [s[0] for s in out["seen"]] == [25, 50, 75, 100, 120]
    assert all(s[3] == 20 and 0 <= s[2] <= 1 for s in out["seen"]), out["seen"]
    assert out["losses"][0] == out["losses"][1]  # the same bits with and without the callback
    assert out["same"]


def test_another_thread_may_call_the_model_during_an_epoch():
    out = run_isolated(TRAINING + """
running, calls, errors = threading.Event(), [], []
def other():
    running.wait()
    while running.is_set():
        try:
            calls.append((m.engine, len(m.run(dev, batch=8)[0])))
        except Exception as e:
            errors.append(repr(e))
            return
t = threading.Thread(target=other)
t.start()
trainer = m.trainer(seed=2)
running.set()
steps = []  # a progress callback needs the GIL between steps, which the other thread may hold
r = trainer.epoch(train, batch=10, progress=lambda done, loss, seconds: steps.append(done))
trainer.epoch(train, batch=10, progress=lambda done, loss, seconds: steps.append(done))
running.clear()
t.join(120)
print(json.dumps({"calls": len(calls), "errors": errors, "alive": t.is_alive(), "steps": len(steps)}))
""")
    assert not out["alive"] and not out["errors"], out
    assert out["steps"] == 24 and out["calls"] >= 1, out


def test_params_are_copied_in_and_read_only_out():
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1, seed=1)
    arrays = {k: v.copy() for k, v in m.params.items()}
    m.set_params(arrays)
    trees = m.read_inputs("sst:" + TEST, limit=10)
    before, _ = m.run(trees)
    for a in arrays.values():  # the caller's arrays, matrices and biases alike, no longer reach the model
        a += 1.0
    after, _ = m.run(trees)
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)
    for name, view in m.params.items():
        assert not view.flags.writeable, name
        with pytest.raises(ValueError):
            view[...] = 0
        with pytest.raises(ValueError):
            view.setflags(write=True)
    # A change through set_params reaches matrices (their GEMM copies) and biases alike: a partial
    # set equals a whole set of the same values.
    w = m.params["W_leaf"] * 2
    keys = m.set_params({"W_leaf": w}, strict=False)
    assert keys.missing == [n for n in m.param_names if n != "W_leaf"] and keys.unexpected == []
    partial, _ = m.run(trees)
    whole = acrobat.load(TREELSTM, dims={"H": 8}, threads=1, params={**m.params, "W_leaf": w})
    for x, y in zip(partial, whole.run(trees)[0]):
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(partial, before))


@pytest.mark.parametrize("engine", ["batched", "reference"])
def test_an_output_that_is_a_param_is_a_copy(engine):
    m = acrobat.loads("param E[4]: f32[1, 3]\ndef main(i: int) -> f32[1, 3] { E[i] }\n", name="rows.acr", seed=1,
                      engine=engine)
    (row,), _ = m.run([2])
    np.testing.assert_array_equal(row, m.params["E"][2])
    row[...] = 7  # the caller's own array
    assert not np.any(m.params["E"][2] == 7)


def test_param_names_are_strict(tmp_path):
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1)
    full = {k: v.copy() for k, v in m.params.items()}
    with pytest.raises(acrobat.Error, match=r"tensors 'extra', 'more' are not params of the model \(its params: emb, W_leaf, "):
        m.set_params({**full, "extra": np.zeros(2), "more": np.zeros(1)})
    with pytest.raises(acrobat.Error, match="no tensor named 'b_out'"):
        m.set_params({k: v for k, v in full.items() if k != "b_out"})
    keys = m.set_params({**full, "extra": np.zeros(2)}, strict=False)
    assert keys == acrobat.ParamKeys([], ["extra"])
    path = os.path.join(str(tmp_path), "w.safetensors")
    m.save(path)
    assert acrobat.load(TREELSTM, dims={"H": 8}, threads=1, params=path).params_source == path
    # A file: the same rule.
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    import safetensors_io

    extra = os.path.join(str(tmp_path), "extra.safetensors")
    safetensors_io.save_file({**{k: v.copy() for k, v in full.items() if k != "W_out"}, "stray": np.ones(3, np.float32)},
                             extra)
    with pytest.raises(acrobat.Error) as e:
        m.set_params(extra)
    assert "tensor 'stray' is not a param" in str(e.value) and "no tensor named 'W_out'" in str(e.value)
    before = m.params["W_out"].copy()
    assert m.set_params(extra, strict=False) == acrobat.ParamKeys(["W_out"], ["stray"])
    np.testing.assert_array_equal(m.params["W_out"], before)
    # A file of gradients is not params, whatever its names.
    grads = os.path.join(str(tmp_path), "g.safetensors")
    subprocess.run([BIN, "grad", TREELSTM, "--set", "H=8", "--input", "sst:" + TRAIN, "--limit", "4", "--params",
                    path, "--out", grads], check=True, capture_output=True)
    with pytest.raises(acrobat.Error, match=r"g\.safetensors: error: holds gradients \(written by `acrobat grad`\), not params"):
        m.set_params(grads)


def test_instances_are_a_sequence_with_labels():
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1)
    trees = m.read_inputs("sst:" + TEST, limit=12)
    values = m.read_values("sst:" + TEST, limit=12)
    assert len(trees) == 12 and list(trees) == values
    assert trees[0] == values[0] and trees[-1] == values[11] and trees[-12] == values[0]
    for i in (12, -13):
        with pytest.raises(IndexError):
            trees[i]
    part = trees[2:9:3]
    assert isinstance(part, acrobat.Instances) and list(part) == values[2:9:3] and part.entry == "main"
    with open(TEST) as f:
        roots = [int(line[1]) for line in f][:12]  # "(3 (2 ..." : the root's label
    assert trees.labels == roots and part.labels == roots[2:9:3]
    scores, _ = m.run(trees)
    right = sum(int(np.argmax(s)) == label for s, label in zip(scores, roots)) / 12
    assert m.accuracy(trees) == pytest.approx(right) and m.accuracy(part) == m.accuracy(part, roots[2:9:3])
    assert m.read_inputs("json:" + os.path.join(ROOT, "examples", "first", "input.jsonl")).labels is None
    # The same trees' sentences (sst-tokens:) carry the same labels, and score by them.
    birnn = acrobat.load(os.path.join(ROOT, "models", "birnn.acr"), dims={"H": 8}, threads=1)
    sentences = birnn.read_inputs("sst-tokens:" + TEST, limit=12)
    assert sentences.labels == roots
    right = sum(int(np.argmax(s)) == label for s, label in zip(birnn.run(sentences)[0], roots)) / 12
    assert birnn.accuracy(sentences) == pytest.approx(right)
    with pytest.raises(acrobat.Error, match="instance 3: label 99 is not one of the 5 classes of 'main'"):
        m.accuracy(trees[:5], [0, 1, 2, 99, 4])
    with pytest.raises(acrobat.Error, match="12 instances but 11 labels"):
        m.accuracy(trees, roots[:11])
    with pytest.raises(acrobat.Error, match="labels: none given"):
        m.accuracy(values)


BAD_ARGUMENTS = [
    (lambda m: m.run([], batch=-1), r"batch=-1: expected an integer from 0 to"),
    (lambda m: m.run([], batch="8"), r"batch='8': expected an integer"),
    (lambda m: m.run([], batch=True), r"batch=True: expected an integer"),
    (lambda m: m.run([], entry=3), r"entry=3: expected a string"),
    (lambda m: m.run(5), r"instances: expected a list"),
    (lambda m: m.read_inputs("sst:" + TEST, limit=-2), r"limit=-2: expected an integer from 0"),
    (lambda m: m.read_inputs("trees.txt"), r"spec='trees.txt': expected KIND:FILE"),
    (lambda m: m.read_inputs("csv:x"), r"spec='csv:x': unknown input kind 'csv'"),
    (lambda m: m.trainer(lr=0), r"lr: expected a number > 0"),
    (lambda m: m.trainer(lr="fast"), r"lr='fast': expected a number"),
    (lambda m: m.trainer(momentum=-1, optimizer="sgd"), r"momentum: expected a number >= 0"),
    (lambda m: m.trainer(weight_decay=-1), r"weight_decay: expected a number >= 0"),
    (lambda m: m.trainer(clip=-1), r"clip: expected a number >= 0"),
    (lambda m: m.trainer(betas=(1.5, 0.9)), r"betas: Adam's betas must lie in \[0, 1\)"),
    (lambda m: m.trainer(seed=-1), r"seed=-1: expected an integer from 0 to 18446744073709551615"),
    (lambda m: m.trainer().epoch([], batch=0), r"batch=0: expected an integer from 1 to"),
    (lambda m: m.evaluate("sst:" + TEST, predict="cell", limit=2), r"predict='cell' returns"),
    (lambda m: m.run([], entry="enc"), r"no function 'enc' to run \(its functions: .*; entry chooses one\)"),
    (lambda m: acrobat.load(TREELSTM, dims={"HH": 64}), r"dims=\{'HH': 64\}: the model has no dim 'HH'"),
    (lambda m: acrobat.load(TREELSTM, dims={"H": "64"}), r"dims=\{'H': '64'\}: expected an integer from 1"),
    (lambda m: acrobat.load(TREELSTM, dims={"H": -1}), r"dims=\{'H': -1\}: expected an integer from 1"),
    (lambda m: acrobat.load(TREELSTM, threads=0), r"threads=0: expected an integer from 1 to 1024"),
    (lambda m: acrobat.load(TREELSTM, disable=["taint"]), r"disable=\['taint'\]: expected specialise"),
    (lambda m: acrobat.load(TREELSTM, disable="share"), r"disable='share': expected a list"),
    (lambda m: acrobat.load(TREELSTM, engine="fast"), r"engine 'fast'"),
    (lambda m: acrobat.load(TREELSTM, params=3), r"params: expected a safetensors path"),
]


@pytest.mark.parametrize("call,message", BAD_ARGUMENTS, ids=[m for _, m in BAD_ARGUMENTS])
def test_bad_arguments_are_errors_in_python_words(call, message):
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1)
    with pytest.raises(acrobat.Error, match=message) as e:
        call(m)
    assert not re.search(r"--[a-z]", str(e.value)), str(e.value)  # no CLI flag


def test_instances_are_numbered_from_zero():
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1)
    leaf = {"Leaf": [1]}
    with pytest.raises(acrobat.Error, match=r"instance 0: at \$\.Leaf\[0\]: expected an integer"):
        m.run([{"Leaf": ["x"]}, leaf])
    with pytest.raises(acrobat.Error, match=r"instance 2: at"):
        m.run([leaf, leaf, {"Leaf": ["x"]}])
    for engine in ("batched", "reference"):
        e = acrobat.load(TREELSTM, dims={"H": 8}, threads=1, engine=engine)
        with pytest.raises(acrobat.Error, match=r"instance 0: index 99999999 is out of range"):
            e.run([{"Leaf": [99999999]}, leaf])
        with pytest.raises(acrobat.Error, match=r"instance 5: index 99999999 is out of range"):
            e.run([leaf] * 5 + [{"Leaf": [99999999]}], batch=2)
        with pytest.raises(acrobat.Error, match=r"instance 105: index 99999999"):
            e.run([leaf] * 5 + [{"Leaf": [99999999]}], batch=2, first_index=100)


def test_dask_errors_name_the_index_in_the_whole_bag():
    import dask
    import dask.bag as dask_bag

    import acrobat.dask

    values = acrobat.load(TREELSTM, dims={"H": 8}).read_values("sst:" + TEST, limit=40)
    for bad, message in (({"Leaf": ["x"]}, r"instance 33: at \$\.Leaf\[0\]"),
                         ({"Leaf": [10 ** 8]}, r"instance 33: index 100000000 is out of range")):
        bag = dask_bag.from_sequence(values[:33] + [bad] + values[34:], partition_size=8)
        assert bag.npartitions == 5
        with dask.config.set(scheduler="sync"), pytest.raises(acrobat.Error, match=message):
            acrobat.dask.map_batches(bag, TREELSTM, dims={"H": 8}, batch=4).compute()
    with dask.config.set(scheduler="sync"):
        bag = dask_bag.from_sequence(values, partition_size=8)
        outputs = acrobat.dask.map_batches(bag, TREELSTM, dims={"H": 8}, batch=4).compute()
    want, _ = acrobat.load(TREELSTM, dims={"H": 8}).run(values, batch=4)
    assert len(outputs) == 40 and all(np.array_equal(a, b) for a, b in zip(outputs, want))


def test_version_and_type_information():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        version = re.search(r"project\(acrobat VERSION ([0-9.]+)", f.read()).group(1)
    assert acrobat.__version__ == version
    assert os.path.isfile(os.path.join(os.path.dirname(acrobat.__file__), "py.typed"))
    public = [acrobat.load, acrobat.loads] + [f for c in (acrobat.Model, acrobat.Trainer)
                                              for n, f in vars(c).items() if not n.startswith("_")]
    for f in public:
        f = f.fget if isinstance(f, property) else f
        hints = typing.get_type_hints(f)
        assert "return" in hints, f.__qualname__
        params = [p for p in inspect.signature(f).parameters if p != "self"]
        assert all(p in hints for p in params), (f.__qualname__, params, hints)


def test_a_type_checker_sees_the_types(tmp_path):
    """mypy (if installed) checks a user's code against the package's types: a wrong use is found."""
    pytest.importorskip("mypy")
    user = os.path.join(str(tmp_path), "user.py")
    with open(user, "w") as f:
        f.write("import acrobat\nm = acrobat.load('m.acr', dims={'H': 8})\nn: int = m.engine\n"
                "outputs, stats = m.run(m.read_inputs('sst:x'), batch=8)\nk: acrobat.ParamKeys = m.set_params(None)\n")
    package = os.path.dirname(os.path.dirname(acrobat.__file__))
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                        "--disallow-untyped-defs", user, os.path.join(package, "acrobat")],
                       capture_output=True, text=True, env=dict(os.environ, MYPYPATH=package))
    assert r.stdout.count("error:") == 1, r.stdout
    assert 'user.py:3: error: Incompatible types in assignment (expression has type "str", variable has type "int")' \
        in r.stdout, r.stdout
