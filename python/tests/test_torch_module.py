"""acrobat.torch.Module: an acrobat model as a layer of a PyTorch model. A Tree-LSTM encoder in
acrobat under a PyTorch linear classifier, trained end to end with torch.optim, equals the same
model written all in PyTorch (tests/reference/models.py) with the same weights, batches and steps.

Run from the repository root with PYTHONPATH=build/python (ctest's python.pytest does)."""

import copy
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import acrobat
import acrobat.torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import registry  # noqa: E402

TEST = os.path.join(ROOT, "data", "sst", "test.txt")
VOCAB = os.path.join(ROOT, "data", "sst", "vocab.txt")
TREELSTM = os.path.join(ROOT, "models", "treelstm.acr")
ENCODE = "\ndef encode(t: Tree) -> f32[1, H] {\n  let (h, _) = cell(t);\n  h\n}\n"


@pytest.mark.parametrize("engine", ["batched", "aot"])
def test_tree_encoder_under_a_torch_classifier_trains_as_pytorch(engine, tmp_path):
    torch.manual_seed(0)
    spec, dims, _, ref, path = registry.setup_run("treelstm", {"H": 16}, TEST, VOCAB, 24, str(tmp_path))
    trees = spec.load_instances(TEST, VOCAB, 24, dims)
    labels = torch.tensor([t.label for t in trees])
    with open(TREELSTM) as f:
        text = f.read() + ENCODE
    m = acrobat.loads(text, name="treelstm+encode", dims={"H": 16}, engine=engine, threads=1, params=path)
    values = m.read_values("sst:" + TEST, entry="encode", vocab=VOCAB, limit=24)
    layer = acrobat.torch.Module(m, entry="encode")
    head = torch.nn.Linear(16, 5)
    ref_head = copy.deepcopy(head)
    opt = torch.optim.Adam(list(layer.parameters()) + list(head.parameters()), lr=1e-2)
    ref_opt = torch.optim.Adam(list(ref.parameters()) + list(ref_head.parameters()), lr=1e-2)
    for step in range(3):
        batch = slice(8 * step, 8 * step + 8)
        h = layer(values[batch])
        assert tuple(h.shape) == (8, 1, 16)
        loss = F.cross_entropy(head(h[:, 0]), labels[batch])
        ref_h = torch.stack([ref.rec(t)[0] for t in trees[batch]])
        ref_loss = F.cross_entropy(ref_head(ref_h[:, 0]), labels[batch])
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5)
        for o, r in ((opt, loss), (ref_opt, ref_loss)):
            o.zero_grad()
            r.backward()
        # The gradients reaching the acrobat params are PyTorch's.
        for name in ("W_leaf", "U_node", "b_node"):
            g, want = getattr(layer, name).grad, getattr(ref, name).grad
            np.testing.assert_allclose(g.numpy().reshape(want.shape), want.numpy(), rtol=1e-4,
                                       atol=1e-4 * float(want.abs().max()))
        opt.step()
        ref_opt.step()
    for name, p in ref.named_parameters():
        got = getattr(layer, name).detach().numpy().reshape(p.shape)
        np.testing.assert_allclose(got, p.detach().numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
    np.testing.assert_allclose(head.weight.detach().numpy(), ref_head.weight.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_ragged_outputs_are_a_tuple_and_their_gradients_flow():
    text = """dim D = 4
param W: f32[D, D]
def main(x: f32[n, D]) -> f32[n, D] { tanh(x @ W) }
"""
    m = acrobat.loads(text, engine="batched", seed=3)
    layer = acrobat.torch.Module(m)
    xs = [np.random.RandomState(i).randn(i + 1, 4).astype(np.float32) for i in range(3)]
    ys = layer(xs)
    assert isinstance(ys, tuple) and [tuple(y.shape) for y in ys] == [(1, 4), (2, 4), (3, 4)]
    sum(((y * y).sum() for y in ys)).backward()
    W = torch.tensor(m.params["W"], requires_grad=True)
    want = sum((torch.tanh(torch.from_numpy(x) @ W) ** 2).sum() for x in xs)
    want.backward()
    np.testing.assert_allclose(layer.W.grad.numpy(), W.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_a_frozen_param_gets_no_gradient():
    text = """dim D = 4
param W: f32[D, D]
param frozen scale: f32[1, D]
def main(x: f32[n, D]) -> f32[n, D] { tanh(x @ W) * scale }
"""
    m = acrobat.loads(text, engine="batched", seed=3)
    layer = acrobat.torch.Module(m)
    xs = [np.random.RandomState(i).randn(i + 1, 4).astype(np.float32) for i in range(3)]
    sum((y * y).sum() for y in layer(xs)).backward()
    assert layer.scale.grad is None
    W = torch.tensor(m.params["W"], requires_grad=True)
    scale = torch.tensor(np.array(m.params["scale"]))
    sum(((torch.tanh(torch.from_numpy(x) @ W) * scale) ** 2).sum() for x in xs).backward()
    np.testing.assert_allclose(layer.W.grad.numpy(), W.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_an_entry_that_does_not_return_one_tensor_is_refused():
    text = "def main(x: (int, f32[1, 2])) -> (f32[1, 2], int) { let (k, s) = x; (s, k) }\n"
    with pytest.raises(acrobat.Error, match="must return one tensor"):
        acrobat.torch.Module(acrobat.loads(text))


ENCODER = os.path.join(ROOT, "models", "encoder.acr")
ENCODER_DIMS = {"D": 128, "NH": 2, "FF": 256}  # heads of 64: the model's scale 0.125 is 1/sqrt(64)


@pytest.mark.parametrize("engine", ["batched", "aot"])
def test_a_torch_layer_before_an_acrobat_encoder_trains_as_pytorch(engine):
    """torch.nn.Linear -> the encoder layer of models/encoder.acr -> mean of the rows -> torch.nn.Linear,
    against the same model all in PyTorch (tests/reference/model_encoder.py), three Adam steps: the
    gradients reach the first Linear through the acrobat layer (its inputs), and every weight ends
    the same."""
    import model_encoder
    torch.manual_seed(0)
    E, D = 24, ENCODER_DIMS["D"]
    ref = model_encoder.init_params(model_encoder.Model(**ENCODER_DIMS), 0)
    with open(ENCODER) as f:
        m = acrobat.loads(f.read(), name="encoder.acr", dims=ENCODER_DIMS, engine=engine, threads=1,
                          params={n: p.detach() for n, p in ref.named_parameters()})
    layer = acrobat.torch.Module(m)
    proj, head = torch.nn.Linear(E, D), torch.nn.Linear(D, 3)
    ref_proj, ref_head = copy.deepcopy(proj), copy.deepcopy(head)
    opt = torch.optim.Adam([*proj.parameters(), *layer.parameters(), *head.parameters()], lr=1e-3)
    ref_opt = torch.optim.Adam([*ref_proj.parameters(), *ref.parameters(), *ref_head.parameters()], lr=1e-3)
    rng = np.random.RandomState(1)
    for step in range(3):
        lengths = [1, 7, 3, 12, 5, 3][step:] + [2] * step  # different each step, ragged
        xs = [torch.from_numpy(rng.randn(n, E).astype(np.float32)) for n in lengths]
        labels = torch.from_numpy(rng.randint(0, 3, len(xs)))
        hs = layer([proj(x) for x in xs])
        assert isinstance(hs, tuple) and [tuple(h.shape) for h in hs] == [(n, D) for n in lengths]
        loss = F.cross_entropy(head(torch.stack([h.mean(0) for h in hs])), labels)
        ref_loss = F.cross_entropy(ref_head(torch.stack([ref(ref_proj(x)).mean(0) for x in xs])), labels)
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5)
        for o, r in ((opt, loss), (ref_opt, ref_loss)):
            o.zero_grad()
            r.backward()
        # The gradient of the layer before the acrobat model comes through its inputs' gradients.
        for got, want in ((proj.weight, ref_proj.weight), (proj.bias, ref_proj.bias), (layer.Wqkv, ref.Wqkv)):
            np.testing.assert_allclose(got.grad.numpy().reshape(want.shape), want.grad.numpy(), rtol=1e-4,
                                       atol=1e-4 * float(want.grad.abs().max()))
        opt.step()
        ref_opt.step()
    for name, p in ref.named_parameters():
        got = getattr(layer, name).detach().numpy().reshape(p.shape)
        np.testing.assert_allclose(got, p.detach().numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
    for a, b in ((proj, ref_proj), (head, ref_head)):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


VTREE = """dim H = 4
param W: f32[2 * H, H]
param b: f32[1, H]
type VTree = VLeaf(f32[1, H]) | VNode(VTree, VTree)
def enc(t: VTree) -> f32[1, H] {
  match t {
    VLeaf(x) => tanh(x),
    VNode(l, r) => tanh(concat(enc(l), enc(r)) @ W + b),
  }
}
"""


@pytest.mark.parametrize("engine", ["batched", "aot"])
def test_tensors_at_the_leaves_of_trees_get_gradients_and_a_shared_one_their_sum(engine):
    """Tensors inside data-type values ({"VLeaf": [x]}); one of them at three leaves of two trees
    and alone, as an instance; one that does not require grad. The gradients equal PyTorch's
    autograd of the same recursion."""
    m = acrobat.loads(VTREE, engine=engine, threads=1, seed=2)
    layer = acrobat.torch.Module(m, entry="enc")
    torch.manual_seed(0)
    proj = torch.nn.Linear(3, 4)
    z = torch.randn(4, 3)
    W = torch.tensor(m.params["W"], requires_grad=True)
    b = torch.tensor(m.params["b"], requires_grad=True)

    def trees(rows, fixed):
        s, a, c = rows[0:1], rows[1:2], rows[2:3]
        leaf = lambda x: {"VLeaf": [x]}  # noqa: E731
        node = lambda l, r: {"VNode": [l, r]}  # noqa: E731
        return [node(leaf(s), leaf(a)), node(node(leaf(c), leaf(s)), leaf(fixed)), leaf(s), node(leaf(s), leaf(c))]

    def enc(t):
        if "VLeaf" in t:
            return torch.tanh(t["VLeaf"][0])
        left, right = t["VNode"]
        return torch.tanh(torch.cat([enc(left), enc(right)], dim=1) @ W + b)

    fixed = torch.randn(1, 4)
    weights = torch.randn(4, 1, 4)
    rows = proj(z)
    rows.retain_grad()
    out = layer(trees(rows, fixed))
    (out * weights).sum().backward()
    ref_proj = copy.deepcopy(proj)
    ref_proj.zero_grad()
    ref_rows = ref_proj(z)
    ref_rows.retain_grad()
    want = torch.stack([enc(t) for t in trees(ref_rows, fixed)])
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    (want * weights).sum().backward()
    # rows[0:1] is at four places, rows[2:3] at two: their sums.
    for got, ref in ((rows.grad, ref_rows.grad), (proj.weight.grad, ref_proj.weight.grad),
                     (layer.W.grad, W.grad), (layer.b.grad, b.grad)):
        np.testing.assert_allclose(got.numpy().reshape(ref.shape), ref.numpy(), rtol=1e-4, atol=1e-6)
    assert float(rows.grad[:3].abs().min()) > 0  # the rows in the trees; the fourth is in none


@pytest.mark.parametrize("engine", ["batched", "aot"])
def test_tensors_in_tuples_and_lists_and_one_given_twice(engine):
    """Instances (int, List[f32[1, H]]) with the rows and a matrix as torch tensors, one tuple
    given twice in the batch: its tensors get the sum of both places' gradients."""
    text = """dim H = 3
param U: f32[H, H]
param V[2]: f32[H, H]
def run(h: f32[1, H], xs: List[f32[1, H]]) -> f32[1, H] {
  match xs {
    Nil => h,
    Cons(x, rest) => run(tanh(h @ U + x), rest),
  }
}
def main(i: (int, List[f32[1, H]])) -> f32[1, H] {
  let (k, xs) = i;
  run(zeros(1, H), xs) @ V[k]
}
"""
    m = acrobat.loads(text, engine=engine, threads=1, seed=4)
    layer = acrobat.torch.Module(m)
    U = torch.tensor(m.params["U"])
    V = torch.tensor(m.params["V"])
    torch.manual_seed(1)
    seqs = [[torch.randn(1, 3, requires_grad=True) for _ in range(n)] for n in (2, 1, 3)]
    instances = [(0, seqs[0]), (1, seqs[1]), (1, seqs[2]), (0, seqs[0])]
    out = layer(instances)
    weights = torch.randn(4, 1, 3)
    (out * weights).sum().backward()
    got = [[x.grad.clone() for x in s] for s in seqs]
    for s in seqs:
        for x in s:
            x.grad = None

    def run(k, xs):
        h = torch.zeros(1, 3)
        for x in xs:
            h = torch.tanh(h @ U + x)
        return h @ V[k]

    want = torch.stack([run(k, xs) for k, xs in instances])
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    (want * weights).sum().backward()
    for gs, s in zip(got, seqs):
        for g, x in zip(gs, s):
            np.testing.assert_allclose(g.numpy(), x.grad.numpy(), rtol=1e-4, atol=1e-6)
