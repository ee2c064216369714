"""An acrobat model as a layer of a PyTorch model, trained end to end by torch.autograd.

    import acrobat, acrobat.torch, torch
    enc = acrobat.loads(source, dims={"H": 64})     # an entry returning one tensor per instance
    layer = acrobat.torch.Module(enc, entry="encode")
    head = torch.nn.Linear(64, 5)
    opt = torch.optim.Adam(list(layer.parameters()) + list(head.parameters()), lr=1e-2)
    h = layer(trees)                                 # [N, 1, 64]: the instances' outputs, stacked
    loss = torch.nn.functional.cross_entropy(head(h[:, 0]), labels)
    loss.backward(); opt.step()                      # the acrobat params are torch Parameters

The module's parameters are ``torch.nn.Parameter`` s, one per acrobat param under its name (a
param's full shape, as ``Model.params``), so that any torch optimiser, ``state_dict`` and
``parameters()`` see them. Each forward gives the model their current values, runs the entry on
every instance batched, and returns the outputs as one tensor ``[N, *shape]`` when every instance's
output has the same shape, else a tuple of tensors (ragged outputs). The backward is acrobat's
batched gradient: the vector-Jacobian product of the upstream gradients, taken as the gradient of
``sum over instances of <entry(x), upstream>`` with respect to every param, computed by a loss
entry acrobat writes for it (``acrobat_vjp``) on the same engine.

Instances may hold torch tensors where the entry takes tensors (an instance that is a tensor
``f32[n, D]``, a tuple or a data-type value holding some, a list of rows): those that require
grad get their gradients too, from the same batched backward, so that torch layers before the
acrobat model train with it:

    proj = torch.nn.Linear(300, 64)                  # per token, before an acrobat encoder
    h = layer([proj(x) for x in sentences])          # x: [n_i, 300]; proj(x): [n_i, 64] each
    loss = ...; loss.backward()                      # proj.weight.grad is set

A tensor given at several places (twice in one instance, or in several instances) gets the sum of
its places' gradients, as torch.autograd sums a tensor's uses.
"""

from collections.abc import Iterator, Mapping
import re
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np
import torch

from . import Error, Model, loads

__all__ = ["Module"]

VJP_ENTRY = "acrobat_vjp"


def _signature(source: str, entry: str) -> Tuple[str, str]:
    """(input type, output type) of ``def entry(x: IN) -> OUT {`` in the model's text."""
    m = re.search(r"\bdef\s+%s\s*\(" % re.escape(entry), source)
    if not m:
        raise Error("entry %r: no function of that name in the model" % entry)
    i, depth = m.end(), 0
    colon = source.index(":", i)
    j = colon + 1
    while j < len(source):
        c = source[j]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                break
            depth -= 1
        j += 1
    arrow = re.compile(r"\s*->\s*([^{]*)\{").match(source, j + 1)
    if not arrow:
        raise Error("entry %r: expected 'def %s(x: TYPE) -> TYPE {'" % (entry, entry))
    return source[colon + 1:j].strip(), arrow.group(1).strip()


def _rank(out_type: str) -> int:
    m = re.fullmatch(r"f32\s*\[(.*)\]", out_type)
    if not m:
        raise Error("acrobat.torch.Module: the entry must return one tensor (f32[...]); it returns %s" % out_type)
    return len([d for d in m.group(1).split(",") if d.strip()])


def vjp_source(source: str, entry: str) -> str:
    """The model's text with a loss entry that is <entry(x), g> for an instance (x, g): its
    gradient with respect to the params is the vector-Jacobian product of g."""
    if re.search(r"\bdef\s+%s\b" % VJP_ENTRY, source):
        raise Error("acrobat.torch.Module: the model already has a function named %r" % VJP_ENTRY)
    in_type, out_type = _signature(source, entry)
    rank = _rank(out_type)
    if rank == 0 or rank > 2:
        raise Error("acrobat.torch.Module: the entry returns %s; tensors of rank 1 or 2 are supported" % out_type)
    total = "sum(y * g, axis=-1)" if rank == 1 else "sum(sum(y * g, axis=-1), axis=0)"
    return (source + "\n// The vector-Jacobian product of %s, written by acrobat.torch.Module.\n"
            "def %s(x: (%s, %s)) -> f32[1, 1] {\n  let (a, g) = x;\n  let y = %s(a);\n  %s\n}\n"
            % (entry, VJP_ENTRY, in_type, out_type, entry, total))


Path = Tuple[Union[int, str], ...]


def _torch_tensors(value: Any) -> Iterator[Tuple[Path, torch.Tensor]]:
    """(path, tensor) of every torch tensor in an instance (a Python value in the JSON input
    encoding): a path is the indices and constructor names that lead to it. By a stack of its own,
    with each path as a chain to its parent's, so that a deep tree costs neither Python's recursion
    nor a path copied per level."""
    todo: List[Tuple[Any, Any]] = [(None, value)]  # (path chain: (step, parent chain) or None, value)
    while todo:
        chain, v = todo.pop()
        if isinstance(v, torch.Tensor):
            steps: List[Union[int, str]] = []
            while chain is not None:
                steps.append(chain[0])
                chain = chain[1]
            yield tuple(reversed(steps)), v
        elif isinstance(v, (list, tuple)):
            todo.extend(((i, chain), x) for i, x in reversed(list(enumerate(v))))
        elif isinstance(v, Mapping):
            todo.extend(((k, chain), x) for k, x in reversed(list(v.items())))


def _at(structure: Any, path: Path) -> np.ndarray:
    """The gradient at ``path`` of an instance's gradient structure (Model.gradients' input_grads)."""
    for step in path:
        structure = structure[step]
    if not isinstance(structure, np.ndarray):
        raise Error("acrobat.torch.Module: an instance's torch tensor is not one of its tensors")
    return structure


class _Apply(torch.autograd.Function):
    """The entry on every instance forward, the batched vector-Jacobian product backward. The
    arguments: the layer, the instances, the places of the input tensors to differentiate (per
    tensor, its (instance, path) pairs), then the params and those tensors, for autograd to reach
    them."""

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        layer, instances, places = args[0], args[1], args[2]
        outputs = layer._run(instances)
        ctx.layer, ctx.instances, ctx.places = layer, instances, places
        ctx.inputs = [(t.shape, t.dtype, t.device) for t in args[3 + len(layer._names):]]
        ctx.shapes = [o.shape for o in outputs]
        ctx.stacked = all(s == ctx.shapes[0] for s in ctx.shapes)
        if ctx.stacked:
            return torch.from_numpy(np.stack(outputs)) if outputs else torch.zeros(0)
        return tuple(torch.from_numpy(o) for o in outputs)

    @staticmethod
    def backward(ctx: Any, *upstream: torch.Tensor) -> Tuple[Any, ...]:
        if ctx.stacked:
            g = upstream[0].detach().to(torch.float32).cpu().numpy()
            gs = [np.ascontiguousarray(g[i]) for i in range(len(ctx.shapes))]
        else:
            gs = [np.zeros(s, np.float32) if u is None else u.detach().to(torch.float32).cpu().numpy()
                  for s, u in zip(ctx.shapes, upstream)]
        first_input = 3 + len(ctx.layer._names)
        wanted = ctx.needs_input_grad[first_input:]
        grads, per_instance = ctx.layer._vjp(ctx.instances, gs, any(wanted))
        inputs: List[Any] = []
        for want, places, (shape, dtype, device) in zip(wanted, ctx.places, ctx.inputs):
            if not want:
                inputs.append(None)
                continue
            # Each instance of the product is (x, upstream): x's gradients are its first part's.
            total = sum(_at(per_instance[i][0], path) for i, path in places)
            inputs.append(torch.from_numpy(np.asarray(total)).reshape(shape).to(dtype=dtype, device=device))
        # A frozen param has no gradient: None leaves its .grad unset, so optimisers skip it.
        return (None, None, None) + tuple(None if n not in grads else torch.from_numpy(grads[n])
                                          for n in ctx.layer._names) + tuple(inputs)


class Module(torch.nn.Module):
    """``model``'s ``entry`` (one tensor per instance) as a torch module over a list of instances
    (Python values, as ``Model.run`` takes them; the torch tensors in them that require grad get
    their gradients). ``batch``: instances per engine run (0: all)."""

    def __init__(self, model: Model, entry: str = "main", batch: int = 0) -> None:
        super().__init__()
        source = getattr(model, "_source", None)
        if source is None:
            raise Error("acrobat.torch.Module: the model must come from acrobat.load or acrobat.loads")
        text, name, dims, options = source
        self._model, self._entry, self._batch = model, entry, int(batch)
        self._names = list(model.param_names)
        self._grad_model = loads(vjp_source(text, entry), name=name, dims=dims, **options)
        for n, a in model.params.items():
            self.register_parameter(n, torch.nn.Parameter(torch.tensor(np.array(a, dtype=np.float32))))

    def _current(self) -> Dict[str, torch.Tensor]:
        return {n: getattr(self, n).detach().cpu().contiguous() for n in self._names}

    def _run(self, instances: List[Any]) -> List[np.ndarray]:
        self._model.set_params(self._current())
        outputs, _ = self._model.run(instances, batch=self._batch, entry=self._entry)
        return [np.asarray(o, dtype=np.float32) for o in outputs]

    def _vjp(self, instances: List[Any], upstream: List[np.ndarray],
             wrt_inputs: bool) -> Tuple[Dict[str, np.ndarray], List[Any]]:
        """The params' gradients and, with ``wrt_inputs``, each (instance, upstream) pair's."""
        self._grad_model.set_params(self._current())
        pairs = [(x, g) for x, g in zip(instances, upstream)]
        if not wrt_inputs:
            _, grads, _ = self._grad_model.gradients(pairs, entry=VJP_ENTRY)
            return grads, []
        _, grads, per_instance, _ = self._grad_model.gradients(pairs, entry=VJP_ENTRY, wrt_inputs=True)
        return grads, per_instance

    def forward(self, instances: Sequence[Any]) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        instances = list(instances)
        # The instances' torch tensors that require grad, each once, with the places it is at.
        tensors: List[torch.Tensor] = []
        places: List[List[Tuple[int, Path]]] = []
        seen: Dict[int, int] = {}
        for i, x in enumerate(instances):
            for path, t in _torch_tensors(x):
                if not t.requires_grad:
                    continue
                k = seen.setdefault(id(t), len(tensors))
                if k == len(tensors):
                    tensors.append(t)
                    places.append([])
                places[k].append((i, path))
        return _Apply.apply(self, instances, places, *(getattr(self, n) for n in self._names), *tensors)
