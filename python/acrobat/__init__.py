"""acrobat from Python: compile a model written for one instance, give it parameters (a safetensors
file, a seed, or a dict of numpy arrays / torch tensors such as a torch ``state_dict()``) and run a
whole list of instances with the tensor work batched across them.

    import acrobat
    m = acrobat.load("models/treelstm.acr", dims={"H": 64}, engine="batched", params="w.safetensors")
    trees = m.read_inputs("sst:data/sst/test.txt")          # acrobat's own readers, or Python values:
    outputs, stats = m.run(trees, batch=64)                 # one numpy array (or tuple, ...) per instance
    print(m.accuracy(trees))                                # sst: trees carry their roots' labels
    losses, grads, stats = m.gradients(m.read_inputs("sst:data/sst/train.txt", entry="loss"))

    trainer = m.trainer(optimizer="adam", lr=1e-3, seed=0)  # as `acrobat train`: same seed, same bits
    train = m.read_inputs("sst:data/sst/train.txt", entry="loss")
    for epoch in range(3):
        print(trainer.epoch(train, batch=25)["mean_loss"])
    m.save("trained.safetensors")

Instances as Python values follow the JSON input encoding (docs/language.md): numbers, bools,
lists (a ``List``), tuples, ``{"Ctor": [fields]}`` for other data types (``{"Node": [l, r]}``,
``{"Leaf": [3]}``), and tensors as numpy arrays, torch tensors or nested lists. Instances are
numbered from 0 in messages. A user error (a malformed model, a wrong shape, an unknown name, a bad
argument) raises ``acrobat.Error`` (a ValueError) whose message says where (``file:line:col:
error: ...``) and names arguments as this package's keywords (``dims={'H': 0}``, ``lr``). A bug in
acrobat itself (a broken internal invariant) raises ``acrobat.InternalError`` (a RuntimeError)
naming the place in acrobat's source; the model stays usable for the next call.

Params, one rule: the model owns its params. Params given as arrays or tensors are copied (as
torch's ``load_state_dict`` copies), so later changes to those arrays do not reach the model;
``m.params`` gives read-only numpy views of the model's own storage (an in-place write raises
ValueError); a change goes through ``set_params`` (a partial mapping with ``strict=False``), and
training updates the params in place. Names are strict by default: a name that is not a param, or
a param not given, is an ``acrobat.Error`` listing them.

Threads: one call runs in a model at a time, with the GIL released; other Python threads may call
the model meanwhile (they wait their turn), and ``Trainer.epoch``'s ``progress`` callback may run
the model (``m.run``, ``m.accuracy``) between steps without changing the epoch's results.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
import json
import os
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np

from ._acrobat import Error, Instances, InternalError, __version__
from . import _acrobat

__all__ = ["Error", "Instances", "InternalError", "Model", "ParamKeys", "Trainer", "__version__", "load", "loads"]

PathLike = Union[str, "os.PathLike[str]"]
Params = Union[PathLike, Mapping[str, Any], None]
InstanceList = Union[Instances, Iterable[Any]]

_integer = _acrobat.integer_argument
_text = _acrobat.text_argument


def _real(flag: str, value: Any) -> float:
    return _acrobat.real_argument(flag, value)


def _vocab(vocab: Optional[PathLike]) -> str:
    """The vocabulary as the native module takes it: "" for its default (vocab.txt beside the data)."""
    return "" if vocab is None else _text("--vocab", vocab)


def _as_array(name: str, value: Any) -> np.ndarray:
    """A float32 C-contiguous numpy array for a param (the model copies it)."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        value = value.numpy()
    try:
        a = np.ascontiguousarray(value, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise Error("params: '%s' cannot be read as float32 (%s)" % (name, e)) from None
    return a


class ParamKeys(NamedTuple):
    """What set_params(strict=False) did not take, as torch's load_state_dict reports it: the params
    not given (they keep their values) and the names given that are not params (ignored)."""

    missing: list
    unexpected: list


class Model:
    """A compiled model, its parameters and an engine (``batched``: the interpreter of the batched
    runtime; ``aot``: the model compiled to C++ and cached; ``reference``: one instance at a time)."""

    # (text, name, dims, options) of load/loads: what acrobat.torch.Module compiles its product from.
    _source: Optional[Tuple[str, str, Optional[Mapping[str, int]], Dict[str, Any]]] = None

    def __init__(self, native: "_acrobat.Model", params: Params = None, seed: int = 0, strict: bool = True):
        self._m = native
        self.set_params(params, seed=seed, strict=strict)

    def set_params(self, params: Params = None, seed: int = 0, strict: bool = True) -> ParamKeys:
        """Sets the parameters from a safetensors path (the file ``acrobat train`` and ``save`` write;
        a file of gradients is refused), a mapping of name to array or torch tensor (shapes agree
        with the declarations after dropping dimensions of size 1, as for files), or None for the
        deterministic initialisation from ``seed``. The values are copied into the model.

        ``strict`` (default): every param must be given and every name must be a param, else an
        acrobat.Error lists the names. ``strict=False``: the params not given keep their current
        values and names that are not params are ignored; both are returned (ParamKeys)."""
        if params is None:
            self._m.params_from_seed(_acrobat.seed_argument(seed))
            return ParamKeys([], [])
        if isinstance(params, (str, os.PathLike)):
            missing, unexpected = self._m.params_from_file(_text("--params", params), bool(strict))
        elif isinstance(params, Mapping):
            arrays = {str(k): _as_array(str(k), v) for k, v in params.items()}
            missing, unexpected = self._m.params_from_arrays(arrays, bool(strict))
        else:
            raise Error("params: expected a safetensors path, a mapping of name to array, or None; got %s"
                        % type(params).__name__)
        return ParamKeys(missing, unexpected)

    @property
    def params(self) -> "dict[str, np.ndarray]":
        """Every param by name as a read-only numpy array over the model's own storage (training
        shows through; a write raises ValueError: use set_params)."""
        return self._m.param_arrays()

    @property
    def param_names(self) -> "list[str]":
        return self._m.param_names()

    @property
    def params_source(self) -> str:
        return self._m.params_source

    @property
    def engine(self) -> str:
        return self._m.engine_name

    def read_inputs(self, spec: str, entry: str = "main", vocab: Optional[PathLike] = None, limit: int = 0) -> Instances:
        """Instances read by acrobat's readers, as ``acrobat run --input`` reads them: ``KIND:FILE``
        with KIND sst, sst-tokens, tokens, json or lengths (``vocab``: for sst, the vocabulary;
        default: vocab.txt beside the file). ``limit``: at most that many (0: all). The result
        indexes, slices and iterates as a list (each instance as a Python value); for sst trees
        and sst-tokens sentences ``labels`` holds each root's label."""
        return self._m.read_inputs(_text("--input", spec), _text("--entry", entry), _vocab(vocab),
                                   _integer("--limit", limit, 0, _acrobat.MAX_COUNT))

    def read_values(self, spec: str, entry: str = "main", vocab: Optional[PathLike] = None, limit: int = 0) -> list:
        """The same instances as Python values (lists, dicts, ...: the JSON input encoding), which
        pickle, for shipping to other processes (acrobat.dask)."""
        return json.loads(self._m.read_values(_text("--input", spec), _text("--entry", entry), _vocab(vocab),
                                              _integer("--limit", limit, 0, _acrobat.MAX_COUNT)))

    def _instances(self, instances: InstanceList) -> Union[Instances, list]:
        if isinstance(instances, Instances):
            return instances
        if isinstance(instances, (str, bytes, Mapping)) or not isinstance(instances, Iterable):
            raise Error("instances: expected a list of instances (or Instances), got %s" % type(instances).__name__)
        return list(instances)  # walked natively: torch tensors read as arrays, nesting bounded

    def run(self, instances: InstanceList, batch: int = 64, entry: str = "main", first_index: int = 0,
            on_error: str = "raise") -> tuple:
        """Runs ``entry`` on every instance, ``batch`` instances per engine run (0: all in one).
        Returns (outputs, stats): one output per instance in order (a numpy array for a tensor, a
        tuple for a tuple, ...) and the run's counters (instances/s, batches, kernel calls, ...).
        ``on_error``: an instance that fails (an index out of range, an empty list gathered, ...)
        raises acrobat.Error ("raise"), or is left out ("skip"): its output is None and
        ``stats["failures"]`` lists ``{"instance": index, "error": message}`` for each one skipped.
        ``first_index``: the index of the first instance in a larger collection, which errors name
        (instance first_index + i; acrobat.dask passes a partition's)."""
        return self._m.run(self._instances(instances), _integer("--batch", batch, 0, _acrobat.MAX_BATCH),
                           _text("--entry", entry), _integer("--first-index", first_index, 0, _acrobat.MAX_COUNT),
                           _text("--on-error", on_error))

    def gradients(self, instances: InstanceList, entry: str = "loss", wrt_inputs: bool = False) -> tuple:
        """The gradient of the summed loss (``entry`` returns one number per instance) with respect
        to every param. Returns (losses, grads, stats): each instance's loss, and a numpy array per
        param name.

        ``wrt_inputs=True``: also with respect to the instances' tensors; returns (losses, grads,
        input_grads, stats), ``input_grads[i]`` shaped as instance i (as ``run`` gives values back):
        the gradient of each of its tensors as a numpy array in its place, tuples, lists and
        ``{"Ctor": [fields]}`` around them, None for numbers, bools and constructors without
        fields. An array or torch tensor is copied at each place of the instances it appears in,
        so a place's gradient is that of its use there: the gradient of a tensor given at several
        places is the sum of theirs."""
        return self._m.gradients(self._instances(instances), _text("--entry", entry), bool(wrt_inputs))

    def trainer(self, optimizer: str = "adam", lr: float = 1e-3, momentum: float = 0.9,
                betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                clip: float = 0.0, seed: int = 0, entry: str = "loss",
                sparse_embeddings: bool = False) -> "Trainer":
        """A Trainer of this model's params on the loss ``entry``, with the optimiser ``acrobat train``
        has: ``adam`` (``betas``, ``eps``) or ``sgd`` (``momentum``; 0 for plain SGD), ``weight_decay``
        added to the gradient, the gradient clipped to the global norm ``clip`` (0: not), and ``seed``
        for the order of each epoch's instances. ``sparse_embeddings``: lazy updates of tables (indexed
        params), a row stepping only when its gradient is non-zero, as PyTorch's SparseAdam (not with
        ``weight_decay``). Trained in place: ``params`` shows the trained values."""
        o = _acrobat.OptimizerOptions()
        o.kind = _text("--optimizer", optimizer)
        o.lr, o.momentum, o.eps = _real("--lr", lr), _real("--momentum", momentum), _real("--eps", eps)
        if isinstance(betas, (str, bytes)) or not isinstance(betas, Sequence) or len(betas) != 2:
            raise Error("betas=%r: expected two numbers" % (betas,))
        o.beta1, o.beta2 = (_real("--betas", b) for b in betas)
        o.weight_decay, o.clip_norm = _real("--weight-decay", weight_decay), _real("--clip", clip)
        if not isinstance(sparse_embeddings, bool):
            raise Error("sparse_embeddings=%r: expected True or False" % (sparse_embeddings,))
        o.sparse_embeddings = sparse_embeddings
        return Trainer(self, _acrobat.Trainer(self._m, o, _acrobat.seed_argument(seed), _text("--entry", entry)))

    def save(self, path: PathLike) -> None:
        """Writes the params as safetensors under their names (what ``params=`` and ``--params`` read)."""
        self._m.save(_text("--params", path))

    def accuracy(self, instances: InstanceList, labels: Optional[Sequence[int]] = None, entry: str = "main",
                 batch: int = 64) -> float:
        """The share of instances whose ``entry`` output (a tensor of scores) is largest at its label:
        ``labels``, or for Instances read from sst trees or sentences their ``labels``. A label that is
        not one of the output's classes, or a count that differs, is an acrobat.Error."""
        if labels is not None:
            labels = [_integer("--labels", label, -2 ** 31, 2 ** 31 - 1) for label in labels]
        return self._m.accuracy(self._instances(instances), labels, _text("--entry", entry),
                                _integer("--batch", batch, 0, _acrobat.MAX_BATCH))

    def evaluate(self, spec: str, loss: str = "loss", predict: str = "main", vocab: Optional[PathLike] = None,
                 limit: int = 0, batch: int = 64) -> dict:
        """A held-out set ``"KIND:FILE"`` evaluated as ``acrobat train`` evaluates its dev and test sets:
        ``{"loss": the mean of the ``loss`` entry, "instances": n}``, and for SST trees also
        ``"accuracy"``: the share whose ``predict`` output is largest at the root's label."""
        return self._m.evaluate(_text("--input", spec), _text("--loss", loss), _text("--predict", predict),
                                _vocab(vocab), _integer("--limit", limit, 0, _acrobat.MAX_COUNT),
                                _integer("--batch", batch, 0, _acrobat.MAX_BATCH))


class Trainer:
    """Steps of a model's optimiser (Model.trainer): each takes the batched gradient of the batch's
    mean loss on the model's engine and updates the params in place."""

    def __init__(self, model: Model, native: "_acrobat.Trainer"):
        self.model = model
        self._t = native

    def step(self, instances: InstanceList) -> float:
        """One gradient and one update on ``instances`` as one batch; returns their mean loss."""
        return self._t.step(self.model._instances(instances))

    def epoch(self, instances: InstanceList, batch: int = 25,
              progress: Optional[Callable[[int, float, float], Any]] = None, on_error: str = "raise") -> dict:
        """One epoch as ``acrobat train`` runs it: the instances in this trainer's random order, one step
        per ``batch``. ``progress(done, mean_loss, seconds)`` is called after each step, with the model
        free: it may run the model (a dev set's accuracy), which leaves the epoch's results as they
        would be without it. Returns a dict: mean_loss, instances, seconds (of the steps),
        backward_seconds, update_seconds, peak_bytes, batch_losses."""
        if progress is not None and not callable(progress):
            raise Error("progress: expected a callable, got %s" % type(progress).__name__)
        return self._t.epoch(self.model._instances(instances), _integer("--batch", batch, 1, _acrobat.MAX_BATCH),
                             progress, _text("--on-error", on_error))

    @property
    def steps(self) -> int:
        return self._t.steps


def _native(source: str, is_text: bool, name: str, dims: Optional[Mapping[str, int]],
            disable: Optional[Iterable[str]], engine: str, threads: Optional[int],
            cache_dir: Optional[PathLike], max_steps: int) -> "_acrobat.Model":
    if isinstance(disable, str) or (disable is not None and not isinstance(disable, Iterable)):
        raise Error("disable=%r: expected a list of analysis names" % (disable,))
    return _acrobat.Model(source, is_text, name, _acrobat.dims_argument(dims),
                          [_text("--disable", d) for d in (disable or ())], _text("--engine", engine),
                          0 if threads is None else _integer("--threads", threads, 1, _acrobat.MAX_THREADS),
                          "" if cache_dir is None else _text("--cache-dir", cache_dir),
                          _integer("--max-steps", max_steps, 0, _acrobat.MAX_STEPS))


def load(path: PathLike, dims: Optional[Mapping[str, int]] = None, engine: str = "batched",
         threads: Optional[int] = None, params: Params = None, seed: int = 0, cache_dir: Optional[PathLike] = None,
         disable: Optional[Iterable[str]] = None, strict: bool = True, max_steps: int = 0) -> Model:
    """Compiles the model file at ``path`` (``dims`` override its ``dim`` declarations;
    ``disable`` names analyses to switch off: "reuse", "share", ...); ``threads``: per batched
    kernel (default: every core); ``cache_dir``: where the AOT engine keeps compiled models (default
    as the CLI's); ``max_steps``: the calls an instance may make, a loop's iterations included,
    before it fails with an Error naming it (0: no limit), so that a loop that never ends does not
    hang the process. ``params``, ``seed``, ``strict``: see Model.set_params."""
    path = _text("--model", path)
    m = Model(_native(path, False, path, dims, disable, engine, threads, cache_dir, max_steps), params, seed, strict)
    with open(path, encoding="utf-8", errors="replace") as f:  # for acrobat.torch.Module
        m._source = (f.read(), path, dims, dict(engine=engine, threads=threads, cache_dir=cache_dir, disable=disable,
                                                max_steps=max_steps))
    return m


def loads(text: str, name: str = "<string>", dims: Optional[Mapping[str, int]] = None, engine: str = "batched",
          threads: Optional[int] = None, params: Params = None, seed: int = 0, cache_dir: Optional[PathLike] = None,
          disable: Optional[Iterable[str]] = None, strict: bool = True, max_steps: int = 0) -> Model:
    """The same for a model's text; ``name`` names it in messages."""
    m = Model(_native(_text("--text", text), True, _text("--name", name), dims, disable, engine, threads, cache_dir,
                      max_steps), params, seed, strict)
    m._source = (text, name, dims, dict(engine=engine, threads=threads, cache_dir=cache_dir, disable=disable,
                                        max_steps=max_steps))
    return m
