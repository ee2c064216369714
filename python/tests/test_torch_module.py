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


def test_an_entry_that_does_not_return_one_tensor_is_refused():
    text = "def main(x: (int, f32[1, 2])) -> (f32[1, 2], int) { let (k, s) = x; (s, k) }\n"
    with pytest.raises(acrobat.Error, match="must return one tensor"):
        acrobat.torch.Module(acrobat.loads(text))
