"""The Python package against the CLI and against PyTorch: the same outputs as `acrobat run` on
every engine, params from a torch state_dict (copied), gradients equal to `acrobat grad`'s,
user errors raised as acrobat.Error with their file:line:col.

Run from the repository root with PYTHONPATH=build/python (ctest's python.pytest does);
ACROBAT_BIN names the CLI to compare with (default build/tools/acrobat)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import acrobat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("ACROBAT_BIN", os.path.join(ROOT, "build", "tools", "acrobat"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import registry  # noqa: E402
import safetensors_io  # noqa: E402

TEST = os.path.join(ROOT, "data", "sst", "test.txt")
VOCAB = os.path.join(ROOT, "data", "sst", "vocab.txt")
TREELSTM = os.path.join(ROOT, "models", "treelstm.acr")
BERXIT = os.path.join(ROOT, "models", "berxit.acr")


def cli_outputs(model, params, input_spec, limit, engine, sets=(), entry="main", tmp=None):
    out = os.path.join(tmp, "cli.json")
    cmd = [BIN, "run", model, "--params", params, "--input", input_spec, "--limit", str(limit),
           "--engine", engine, "--output", out, "--entry", entry]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(out) as f:
        return json.load(f)["outputs"]


def as_array(o):
    return np.asarray(o["data"], dtype=np.float32).reshape(o["shape"])


@pytest.fixture(scope="module")
def treelstm_params(tmp_path_factory):
    """The oracle Tree-LSTM (H 64) and its weights as a safetensors file."""
    d = tmp_path_factory.mktemp("treelstm")
    spec, dims, _, model, path = registry.setup_run("treelstm", {"H": 64}, TEST, VOCAB, 40, str(d))
    return model, path


@pytest.mark.parametrize("engine", ["batched", "aot", "reference"])
def test_outputs_equal_the_cli(engine, treelstm_params, tmp_path):
    _, path = treelstm_params
    m = acrobat.load(TREELSTM, dims={"H": 64}, engine=engine, threads=1, params=path)
    trees = m.read_inputs("sst:" + TEST, limit=40)
    assert len(trees) == 40
    outputs, stats = m.run(trees, batch=16)
    assert stats["instances"] == 40
    expected = cli_outputs(TREELSTM, path, "sst:" + TEST, 40, engine, ["H=64"], tmp=str(tmp_path))
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        np.testing.assert_array_equal(got, as_array(want))  # the same engine: the same bits


def test_state_dict_params_are_copied_and_match_pytorch(treelstm_params):
    model, _ = treelstm_params
    state = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    m = acrobat.load(TREELSTM, dims={"H": 64}, engine="batched", threads=1, params=state)
    # Copied: the model's params are its own memory, equal to the tensors.
    for name, array in m.params.items():
        assert array.__array_interface__["data"][0] != state[name].data_ptr(), name
        np.testing.assert_array_equal(array.reshape(-1), state[name].numpy().reshape(-1))
    trees = m.read_inputs("sst:" + TEST, limit=25)
    outputs, _ = m.run(trees, batch=25)
    # PyTorch's Tree-LSTM on the same trees and weights (tests/reference/models.py).
    spec = registry.get("treelstm")
    instances = spec.load_instances(TEST, VOCAB, 25, registry.resolve_dims(spec, {"H": 64}, VOCAB))
    for got, inst in zip(outputs, instances):
        want = model(inst).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_python_values_as_instances():
    text = """dim H = 4
param emb[10]: f32[1, H]
param W: f32[2 * H, H]
def enc(t: Tree) -> f32[1, H] {
  match t {
    Leaf(w) => emb[w],
    Node(l, r) => tanh(concat(enc(l), enc(r)) @ W),
  }
}
def main(t: Tree) -> f32[1, H] { enc(t) }
def pair(x: (f32[2, H], int)) -> (f32[1, H], int) {
  let (m, k) = x;
  (sum(m, axis=0), k + 1)
}
"""
    m = acrobat.loads(text, name="tiny.acr", threads=1, seed=3)
    leaf = lambda w: {"Leaf": [w]}  # noqa: E731
    trees = [leaf(1), {"Node": [leaf(2), {"Node": [leaf(np.int64(3)), leaf(4)]}]}]  # numpy scalars too
    out, _ = m.run(trees)
    ref = acrobat.loads(text, name="tiny.acr", engine="reference", seed=3)
    out_ref, _ = ref.run(trees)
    for a, b in zip(out, out_ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_array_equal(out[0], m.params["emb"][1])  # emb[10]: f32[1, H] is [10, 1, H]
    x = np.arange(2 * 4, dtype=np.float64).reshape(2, 4)
    (y, k), = m.run([(x, 4)], entry="pair")[0]
    np.testing.assert_allclose(y, x.sum(axis=0, keepdims=True))
    assert k == 5


def test_gradients_equal_the_cli(tmp_path):
    spec, dims, _, model, path = registry.setup_run("berxit", {"L": 2}, TEST, VOCAB, 5, str(tmp_path))
    data = os.path.join(str(tmp_path), "loss.json")
    spec.make_loss_data(data, 5, 1, dict(dims))
    m = acrobat.load(BERXIT, dims={"L": 2}, engine="batched", threads=1, params=path)
    insts = m.read_inputs("json:" + data, entry="loss")
    losses, grads, _ = m.gradients(insts)
    out = os.path.join(str(tmp_path), "grads.safetensors")
    subprocess.run([BIN, "grad", BERXIT, "--params", path, "--input", "json:" + data, "--set", "L=2",
                    "--engine", "batched", "--threads", "1", "--out", out], check=True, capture_output=True)
    want, meta = safetensors_io.load_file(out)
    assert abs(sum(losses) - float(meta["loss_sum"])) <= 1e-5 * abs(float(meta["loss_sum"]))
    for name, g in grads.items():
        np.testing.assert_array_equal(g.reshape(-1), np.asarray(want[name], dtype=np.float32).reshape(-1))


def test_gradients_with_respect_to_inputs_are_shaped_as_the_instances():
    """Model.gradients(wrt_inputs=True): per instance its structure with the gradient of each tensor
    in its place (None for numbers, constructors without fields), equal to torch.autograd's."""
    import torch
    text = """type Tag = Plain | Scaled(float)
param W: f32[3, 3]
def rows(xs: List[f32[1, 3]]) -> f32[1, 1] {
  match xs {
    Nil => zeros(1, 1),
    Cons(x, rest) => sum(tanh(x @ W), axis=-1) + rows(rest),
  }
}
def loss(x: (int, f32[2, 3], List[f32[1, 3]], Tag)) -> f32[1, 1] {
  let (k, A, xs, _) = x;
  let h = sum(A @ W, axis=0);
  let s = sum(h * h, axis=-1);
  if k == 2 { s * 2.0 + rows(xs) } else { s + rows(xs) }
}
"""
    for engine in ("batched", "reference"):
        m = acrobat.loads(text, engine=engine, threads=1, seed=1)
        rng = np.random.RandomState(0)
        insts = [(k + 1, rng.randn(2, 3).astype(np.float32), [rng.randn(1, 3).astype(np.float32) for _ in range(k + 1)],
                  "Plain" if k % 2 else {"Scaled": [0.5]}) for k in range(3)]
        losses, grads, per_instance, stats = m.gradients(insts, wrt_inputs=True)
        assert stats["instances"] == 3 and len(per_instance) == 3
        W = torch.tensor(m.params["W"], requires_grad=True)
        for (k, A, xs, tag), loss, g in zip(insts, losses, per_instance):
            assert isinstance(g, tuple) and len(g) == 4 and g[0] is None and g[3] in (None, {"Scaled": [None]})
            assert isinstance(g[2], list) and len(g[2]) == len(xs)
            tA = torch.tensor(A, requires_grad=True)
            txs = [torch.tensor(x, requires_grad=True) for x in xs]
            h = (tA @ W).sum(0)
            want = (h * h).sum() * (2 if k == 2 else 1) + sum(torch.tanh(x @ W).sum() for x in txs)
            want.backward()
            assert abs(loss - want.item()) <= 1e-5 * abs(want.item())
            np.testing.assert_allclose(g[1], tA.grad.numpy(), rtol=1e-5, atol=1e-6)
            for gx, tx in zip(g[2], txs):
                np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads["W"], W.grad.numpy(), rtol=1e-5, atol=1e-6)
        assert len(m.gradients(insts)) == 3  # without: (losses, grads, stats), as before


def test_errors_are_exceptions_with_where():
    with pytest.raises(acrobat.Error, match=r"bad\.acr:2:39: error: unknown name 'nope'"):
        acrobat.loads("param W: f32[2, 2]\ndef main(x: f32[1, 2]) -> f32[1, 2] { nope }\n", name="bad.acr")
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1)
    with pytest.raises(acrobat.Error, match="no tensor named"):
        m.set_params({"emb": np.zeros((3, 8), np.float32)})
    with pytest.raises(acrobat.Error, match=r"tensor 'W_leaf' has shape"):
        m.set_params({k: (np.zeros((2, 2), np.float32) if k == "W_leaf" else v) for k, v in m.params.items()})
    with pytest.raises(acrobat.Error, match="instance 0: at"):
        m.run([{"Leaf": ["not an id"]}])
    with pytest.raises(acrobat.Error, match="out of range"):
        m.run([{"Leaf": [10 ** 9]}])
    with pytest.raises(acrobat.Error, match="engine 'fast'"):
        acrobat.load(TREELSTM, engine="fast")
    deep = {"Leaf": [1]}
    for _ in range(200000):  # far deeper than the readers allow: an error, not a crash of the interpreter
        deep = {"Node": [deep, {"Leaf": [2]}]}
    with pytest.raises(acrobat.Error, match="nested more than 5000 levels"):
        m.run([deep])


def test_dask_two_workers_give_the_cli_outputs(treelstm_params, tmp_path):
    """The SST test trees over a LocalCluster of two worker processes, partitions of 256 trees run
    in batches of 64: exactly `acrobat run --batch 64`'s outputs (the same batches, the same bits)."""
    import dask.bag as dask_bag
    import dask.distributed as distributed

    import acrobat.dask

    _, path = treelstm_params
    m = acrobat.load(TREELSTM, dims={"H": 64}, threads=1, params=path)
    trees = m.read_values("sst:" + TEST)
    assert len(trees) == 2210
    expected = cli_outputs(TREELSTM, path, "sst:" + TEST, 2210, "batched", ["H=64"], tmp=str(tmp_path))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        bag = dask_bag.from_sequence(trees, partition_size=256)
        outputs = acrobat.dask.map_batches(bag, TREELSTM, params=path, dims={"H": 64}, batch=64).compute()
        workers = client.run(lambda: sorted(k[0] for k in __import__("acrobat.dask").dask._models))
    assert len(workers) == 2 and all(w == [TREELSTM] for w in workers.values()), workers  # both ran, once each
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, as_array(want))


TRAIN = os.path.join(ROOT, "data", "sst", "train.txt")


# Models trained from Python and by `acrobat train`: (model, dims, training input, loss entry). The
# ragged ones (BERxiT on SST's sentences with their roots' labels, the encoder layer under its pooled
# classifier on sequences of MNLI's lengths) take the batched backward of ragged blocks.
TRAINED = {
    "treelstm": (TREELSTM, {"H": 16}, "sst:" + TRAIN, "loss"),
    "berxit": (BERXIT, {"D": 128, "NH": 2, "FF": 256, "L": 2, "C": 5}, "sst-tokens:" + TRAIN, "sst_loss"),
    "encoder": (os.path.join(ROOT, "models", "encoder.acr"), {"D": 128, "NH": 2, "FF": 256},
                "lengths:" + os.path.join(ROOT, "data", "lengths", "mnli.txt"), "loss"),
}


@pytest.mark.parametrize("name", sorted(TRAINED))
@pytest.mark.parametrize("engine", ["batched", "aot"])
def test_training_gives_the_weights_acrobat_train_gives(name, engine, tmp_path):
    """Two epochs from Python (seeded params, Adam, clipping, weight decay) end on exactly the weights
    `acrobat train` writes with the same seed and settings, and the training loss falls."""
    model, dims, spec, entry = TRAINED[name]
    cli = os.path.join(str(tmp_path), "cli.safetensors")
    sets = [a for k, v in dims.items() for a in ("--set", "%s=%d" % (k, v))]
    subprocess.run([BIN, "train", model] + sets + ["--input", spec, "--loss", entry, "--limit", "60",
                    "--batch", "16", "--epochs", "2", "--seed", "5", "--lr", "0.01", "--clip", "1",
                    "--weight-decay", "0.001", "--engine", engine, "--threads", "1", "--out", cli, "--quiet"],
                   check=True, capture_output=True)
    m = acrobat.load(model, dims=dims, engine=engine, threads=1, seed=5)
    before = {k: v.copy() for k, v in m.params.items()}
    trainer = m.trainer(lr=0.01, clip=1.0, weight_decay=0.001, seed=5, entry=entry)
    train = m.read_inputs(spec, entry=entry, limit=60)
    seen = []
    first = trainer.epoch(train, batch=16, progress=lambda done, loss, seconds: seen.append(done))
    second = trainer.epoch(train, batch=16)
    assert seen == [16, 32, 48, 60] and trainer.steps == 8
    assert len(first["batch_losses"]) == 4 and second["mean_loss"] < first["mean_loss"]
    want, _ = safetensors_io.load_file(cli)
    for name, got in m.params.items():
        assert not np.array_equal(got, before[name]), name  # trained
        np.testing.assert_array_equal(got.reshape(-1), np.asarray(want[name], dtype=np.float32).reshape(-1))
    out = os.path.join(str(tmp_path), "py.safetensors")
    m.save(out)
    again = acrobat.load(model, dims=dims, engine=engine, threads=1, params=out)
    for name, got in again.params.items():
        np.testing.assert_array_equal(got, m.params[name])


def test_training_borrowed_params_trains_a_copy_and_steps_lower_the_loss():
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1, seed=1)
    arrays = {k: v.copy() for k, v in m.params.items()}
    kept = {k: v.copy() for k, v in arrays.items()}
    m.set_params(arrays)
    trainer = m.trainer(optimizer="sgd", lr=0.05, momentum=0.9)
    batch = m.read_inputs("sst:" + TRAIN, entry="loss", limit=20)
    losses = [trainer.step(batch) for _ in range(5)]
    assert losses[-1] < losses[0], losses
    for name, a in arrays.items():
        np.testing.assert_array_equal(a, kept[name])  # the caller's arrays are untouched
        assert not np.array_equal(m.params[name], a), name
    # The same from Python values: the loss equals the summed losses of gradients() over the batch.
    values = m.read_values("sst:" + TRAIN, entry="loss", limit=20)
    losses_now, _, _ = m.gradients(values)
    assert abs(trainer.step(values) - sum(losses_now) / 20) <= 1e-6 * abs(sum(losses_now))
    # Accuracy: the argmax of each output is right, one past it (mod the classes) is wrong.
    trees = m.read_inputs("sst:" + TEST, limit=30)
    scores, _ = m.run(trees)
    best = [int(np.argmax(s)) for s in scores]
    assert m.accuracy(trees, best) == 1.0
    assert m.accuracy(trees, [(b + 1) % scores[0].size for b in best[:10]] + best[10:]) == pytest.approx(20 / 30)


@pytest.mark.parametrize("engine", ["reference", "aot"])  # without and with the chunks a gradient wrote
def test_sparse_embeddings_step_only_the_rows_a_batch_touches(engine):
    first_batch = None
    moved = {}
    for sparse in (True, False):
        m = acrobat.load(TREELSTM, dims={"H": 8}, engine=engine, threads=1, seed=1)
        trainer = m.trainer(lr=0.01, sparse_embeddings=sparse)
        values = m.read_values("sst:" + TRAIN, entry="loss", limit=20)
        first, second = values[:10], values[10:]
        _, grads, _ = m.gradients(first)
        first_batch = np.any(grads["emb"].reshape(grads["emb"].shape[0], -1) != 0, axis=1)
        trainer.step(first)
        before = m.params["emb"].copy()
        _, grads, _ = m.gradients(second)
        touched = np.any(grads["emb"].reshape(before.shape[0], -1) != 0, axis=1)
        trainer.step(second)
        moved[sparse] = np.any((m.params["emb"] != before).reshape(before.shape[0], -1), axis=1)
        assert touched.sum() > 0 and np.array_equal(moved[sparse] & touched, touched)
    # Lazy: the second step moves exactly its own rows; the dense update also moves the first
    # batch's rows again (their Adam moments are not zero).
    assert np.array_equal(moved[True], touched)
    assert np.any(moved[False] & first_batch & ~touched)


def test_training_errors():
    m = acrobat.load(TREELSTM, dims={"H": 8}, threads=1)
    with pytest.raises(acrobat.Error, match="sparse_embeddings: not with weight_decay"):
        m.trainer(sparse_embeddings=True, weight_decay=0.01)
    with pytest.raises(acrobat.Error, match="sparse_embeddings='yes': expected True or False"):
        m.trainer(sparse_embeddings="yes")
    with pytest.raises(acrobat.Error, match="optimizer='rmsprop': expected adam or sgd"):
        m.trainer(optimizer="rmsprop")
    with pytest.raises(acrobat.Error, match="lr: expected a number > 0"):
        m.trainer(lr=0)
    with pytest.raises(acrobat.Error, match=r"treelstm\.acr:\d+:\d+: error: the loss entry 'main' returns"):
        m.trainer(entry="main")
    trainer = m.trainer()
    with pytest.raises(acrobat.Error, match="at least one instance"):
        trainer.step([])
    m.set_params(seed=2)
    with pytest.raises(acrobat.Error, match="params were replaced"):
        trainer.step(m.read_inputs("sst:" + TRAIN, entry="loss", limit=2))
    with pytest.raises(acrobat.Error, match="3 instances but 2 labels"):
        m.accuracy(m.read_inputs("sst:" + TEST, limit=3), [1, 2])


def test_import_leaves_threads_unpinned():
    """libxsmm's start-up puts OMP_PROC_BIND=TRUE in the environment; acrobat takes it back out, so
    that PyTorch imported after acrobat does not pin the process (and all it starts) to one core."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_"))}
    code = ("import ctypes, os, acrobat, torch; libc = ctypes.CDLL(None); libc.getenv.restype = ctypes.c_char_p; "
            "print(libc.getenv(b'OMP_PROC_BIND'), sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split(None, 1)[0] == "None", out
    assert out.split(None, 1)[1].strip() == str(sorted(os.sched_getaffinity(0))), out


@pytest.mark.parametrize("engine", ["batched", "aot", "reference"])
def test_internal_error_is_an_exception(engine, treelstm_params, monkeypatch):
    """A broken internal invariant (made to happen with ACROBAT_INJECT_FAULT at the third instance
    of a run) raises acrobat.InternalError naming the place in acrobat's source; the interpreter and
    the model live on, and the next run gives the outputs of a run that never met it."""
    _, path = treelstm_params
    m = acrobat.load(TREELSTM, dims={"H": 64}, engine=engine, threads=1, params=path)
    trees = m.read_inputs("sst:" + TEST, limit=8)
    expected, _ = m.run(trees, batch=8)
    monkeypatch.setenv("ACROBAT_INJECT_FAULT", "instance:3")
    with pytest.raises(acrobat.InternalError, match=r"internal error at src/.*fault injected"):
        m.run(trees, batch=8)
    assert issubclass(acrobat.InternalError, RuntimeError)
    assert not issubclass(acrobat.InternalError, acrobat.Error)
    monkeypatch.delenv("ACROBAT_INJECT_FAULT")
    outputs, _ = m.run(trees, batch=8)
    assert len(outputs) == len(expected)
    for a, b in zip(outputs, expected):
        np.testing.assert_array_equal(a, b)


def test_evaluate_gives_the_figures_acrobat_train_logs(tmp_path):
    """Model.evaluate of a dev set is what `acrobat train` logs for it (the same library function):
    the mean loss and the accuracy of the trained weights, over the same first 40 trees."""
    out = os.path.join(str(tmp_path), "w.safetensors")
    log = os.path.join(str(tmp_path), "log.json")
    dev = os.path.join(ROOT, "data", "sst", "dev.txt")
    subprocess.run([BIN, "train", TREELSTM, "--set", "H=16", "--input", "sst:" + TRAIN, "--limit", "50",
                    "--dev", "sst:" + dev, "--dev-limit", "40", "--batch", "25", "--seed", "3", "--threads", "1",
                    "--out", out, "--log", log, "--quiet"], check=True, capture_output=True)
    with open(log) as f:
        row = json.load(f)["epochs"][0]
    m = acrobat.load(TREELSTM, dims={"H": 16}, threads=1, params=out)
    e = m.evaluate("sst:" + dev, limit=40, batch=25)
    assert e["instances"] == 40
    assert e["loss"] == pytest.approx(row["dev_loss"], rel=1e-12)
    assert e["accuracy"] == pytest.approx(row["dev_accuracy"], rel=1e-12)
    with pytest.raises(acrobat.Error, match="no function 'nope'"):
        m.evaluate("sst:" + dev, loss="nope", limit=4)


def test_disabled_analyses_give_the_same_outputs_as_the_cli(treelstm_params, tmp_path):
    """load(disable=...) switches analyses off as `--disable` does (one reading of the names): the
    outputs equal the CLI's with the same switches, and an unknown name is an acrobat.Error."""
    _, path = treelstm_params
    m = acrobat.load(TREELSTM, dims={"H": 64}, threads=1, params=path, disable=["share", "reuse"])
    trees = m.read_inputs("sst:" + TEST, limit=20)
    outputs, stats = m.run(trees, batch=20)
    assert stats["shared_nodes"] == 0
    want = cli_outputs(TREELSTM, path, "sst:" + TEST, 20, "batched", sets=["H=64"], tmp=str(tmp_path))
    for got, w in zip(outputs, want):
        np.testing.assert_allclose(got, as_array(w), rtol=1e-5, atol=1e-6)
    with pytest.raises(acrobat.Error, match=r"disable=\['nothing'\]: expected specialise, reuse"):
        acrobat.load(TREELSTM, dims={"H": 8}, disable=["nothing"])
