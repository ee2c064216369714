"""acrobat from Python: compile a model written for one instance, give it parameters (a safetensors
file, a seed, or a dict of numpy arrays / torch tensors such as a torch ``state_dict()``) and run a
whole list of instances with the tensor work batched across them.

    import acrobat
    m = acrobat.load("models/treelstm.acr", dims={"H": 64}, engine="batched", params="w.safetensors")
    trees = m.read_inputs("sst:data/sst/test.txt")          # acrobat's own readers, or Python values:
    outputs, stats = m.run(trees, batch=64)                 # one numpy array (or tuple, ...) per instance
    losses, grads, stats = m.gradients(m.read_inputs("sst:data/sst/train.txt", entry="loss"))

    trainer = m.trainer(optimizer="adam", lr=1e-3, seed=0)  # as `acrobat train`: same seed, same bits
    train = m.read_inputs("sst:data/sst/train.txt", entry="loss")
    for epoch in range(3):
        print(trainer.epoch(train, batch=25)["mean_loss"])
    m.save("trained.safetensors")

Instances as Python values follow the JSON input encoding (docs/language.md): numbers, bools,
lists (a ``List``), tuples, ``{"Ctor": [fields]}`` for other data types (``{"Node": [l, r]}``,
``{"Leaf": [3]}``), and tensors as numpy arrays, torch tensors or nested lists. A user error (a
malformed model, a wrong shape, an unknown name) raises ``acrobat.Error`` (a ValueError) whose
message says where: ``file:line:col: error: ...``. A bug in acrobat itself (a broken internal
invariant) raises ``acrobat.InternalError`` (a RuntimeError) naming the place in acrobat's source;
the model stays usable for the next call.

Params given as float32 C-contiguous arrays (a CPU torch tensor of that layout included) are used
in place, not copied: the model reads them while it runs, so change them only between runs (a
matrix also keeps a copy prepared for the GEMM kernels, made when the params are set). Training
updates params the model owns: a trainer made on borrowed arrays trains a copy of them.
"""

from collections.abc import Mapping
import json
import os

import numpy as np

from ._acrobat import Error, Instances, InternalError
from . import _acrobat

__all__ = ["Error", "Instances", "InternalError", "Model", "Trainer", "load", "loads"]


def _vocab(vocab):
    """The vocabulary as the native module takes it: "" for its default (vocab.txt beside the data)."""
    return "" if vocab is None else os.fspath(vocab)


def _as_array(name, value):
    """A float32 C-contiguous numpy array for a param: the same memory when it already is one (a CPU
    torch tensor of that layout included), else a converted copy."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        value = value.numpy()
    a = np.ascontiguousarray(value, dtype=np.float32)
    if a.dtype != np.float32:
        raise Error("param '%s': cannot be read as float32" % name)
    return a


class Model:
    """A compiled model, its parameters and an engine (``batched``: the interpreter of the batched
    runtime; ``aot``: the model compiled to C++ and cached; ``reference``: one instance at a time)."""

    def __init__(self, native, params=None, seed=0):
        self._m = native
        self.set_params(params, seed=seed)

    def set_params(self, params=None, seed=0):
        """The parameters: a safetensors path (the file ``acrobat train`` writes), a mapping of name to
        array or torch tensor (shapes agree with the declarations after dropping dimensions of size
        1, as for files), or None for the deterministic initialisation from ``seed``. Returns the
        names that are not params of the model (ignored)."""
        if params is None:
            self._m.params_from_seed(int(seed))
            return []
        if isinstance(params, (str, os.PathLike)):
            return self._m.params_from_file(os.fspath(params))
        if isinstance(params, Mapping):
            arrays = {str(k): _as_array(k, v) for k, v in params.items()}
            return self._m.params_from_arrays(arrays, "the params given")
        raise Error("params: expected a safetensors path, a mapping of name to array, or None; got %s"
                    % type(params).__name__)

    @property
    def params(self):
        """Every param by name as a numpy array over the model's own storage (writes change the
        params; a matrix's GEMM copy is refreshed only by set_params)."""
        return self._m.param_arrays()

    @property
    def param_names(self):
        return self._m.param_names()

    @property
    def params_source(self):
        return self._m.params_source

    @property
    def engine(self):
        return self._m.engine_name

    def read_inputs(self, spec, entry="main", vocab=None, limit=0):
        """Instances read by acrobat's readers, as ``acrobat run --input`` reads them: ``KIND:FILE``
        with KIND sst, sst-tokens, tokens, json or lengths (``vocab``: for sst, the vocabulary;
        default: vocab.txt beside the file). ``limit``: at most that many (0: all)."""
        return self._m.read_inputs(spec, entry, _vocab(vocab), int(limit))

    def read_values(self, spec, entry="main", vocab=None, limit=0):
        """The same instances as Python values (lists, dicts, ...: the JSON input encoding), which
        pickle, for shipping to other processes (acrobat.dask)."""
        return json.loads(self._m.read_values(spec, entry, _vocab(vocab), int(limit)))

    def _instances(self, instances):
        if isinstance(instances, Instances):
            return instances
        return list(instances)  # walked natively: torch tensors read as arrays, nesting bounded

    def run(self, instances, batch=64, entry="main"):
        """Runs ``entry`` on every instance, ``batch`` instances per engine run (0: all in one).
        Returns (outputs, stats): one output per instance in order (a numpy array for a tensor, a
        tuple for a tuple, ...) and the run's counters (instances/s, batches, kernel calls, ...)."""
        return self._m.run(self._instances(instances), int(batch), entry)

    def gradients(self, instances, entry="loss"):
        """The gradient of the summed loss (``entry`` returns one number per instance) with respect
        to every param. Returns (losses, grads, stats): each instance's loss, and a numpy array per
        param name."""
        return self._m.gradients(self._instances(instances), entry)

    def trainer(self, optimizer="adam", lr=1e-3, momentum=0.9, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                clip=0.0, seed=0, entry="loss"):
        """A Trainer of this model's params on the loss ``entry``, with the optimiser ``acrobat train``
        has: ``adam`` (``betas``, ``eps``) or ``sgd`` (``momentum``; 0 for plain SGD), ``weight_decay``
        added to the gradient, the gradient clipped to the global norm ``clip`` (0: not), and ``seed``
        for the order of each epoch's instances. Trained in place: ``params`` shows the trained values
        (params borrowed from arrays are copied first, so those arrays never change)."""
        if optimizer not in ("adam", "sgd"):
            raise Error("optimizer %r: expected 'adam' or 'sgd'" % (optimizer,))
        o = _acrobat.OptimizerOptions()
        o.kind, o.lr, o.momentum, o.eps = optimizer, float(lr), float(momentum), float(eps)
        o.beta1, o.beta2 = (float(b) for b in betas)
        o.weight_decay, o.clip_norm = float(weight_decay), float(clip)
        return Trainer(self, _acrobat.Trainer(self._m, o, int(seed), entry))

    def save(self, path):
        """Writes the params as safetensors under their names (what ``params=`` and ``--params`` read)."""
        self._m.save(os.fspath(path))

    def accuracy(self, instances, labels, entry="main", batch=64):
        """The share of instances whose ``entry`` output (a tensor of scores) is largest at its label."""
        return self._m.accuracy(self._instances(instances), [int(label) for label in labels], entry, int(batch))

    def evaluate(self, spec, loss="loss", predict="main", vocab=None, limit=0, batch=64):
        """A held-out set ``"KIND:FILE"`` evaluated as ``acrobat train`` evaluates its dev and test sets:
        ``{"loss": the mean of the ``loss`` entry, "instances": n}``, and for SST trees also
        ``"accuracy"``: the share whose ``predict`` output is largest at the root's label."""
        return self._m.evaluate(spec, loss, predict, _vocab(vocab), int(limit), int(batch))


class Trainer:
    """Steps of a model's optimiser (Model.trainer): each takes the batched gradient of the batch's
    mean loss on the model's engine and updates the params in place."""

    def __init__(self, model, native):
        self.model = model
        self._t = native

    def step(self, instances):
        """One gradient and one update on ``instances`` as one batch; returns their mean loss."""
        return self._t.step(self.model._instances(instances))

    def epoch(self, instances, batch=25, progress=None):
        """One epoch as ``acrobat train`` runs it: the instances in this trainer's random order, one step
        per ``batch``. ``progress(done, mean_loss, seconds)`` is called after each step. Returns a dict:
        mean_loss, instances, seconds, backward_seconds, update_seconds, peak_bytes, batch_losses."""
        return self._t.epoch(self.model._instances(instances), int(batch), progress)

    @property
    def steps(self):
        return self._t.steps


def _native(source, is_text, name, dims, disable, engine, threads, cache_dir):
    return _acrobat.Model(source, is_text, name, {str(k): int(v) for k, v in (dims or {}).items()},
                          [str(d) for d in (disable or ())], engine, int(threads or 0), cache_dir or "")


def load(path, dims=None, engine="batched", threads=None, params=None, seed=0, cache_dir=None, disable=None):
    """Compiles the model file at ``path`` (``dims`` override its ``dim`` declarations, as
    ``--set``; ``disable`` names analyses to switch off, as ``--disable``: "reuse", "share", ...);
    ``threads``: per batched kernel (default: every core); ``cache_dir``: where the AOT engine keeps
    compiled models (default as the CLI's). ``params``: see Model.set_params."""
    m = Model(_native(os.fspath(path), False, os.fspath(path), dims, disable, engine, threads, cache_dir),
              params, seed)
    with open(os.fspath(path), encoding="utf-8", errors="replace") as f:  # for acrobat.torch.Module
        text = f.read()
    m._source = (text, os.fspath(path), dims, dict(engine=engine, threads=threads, cache_dir=cache_dir, disable=disable))
    return m


def loads(text, name="<string>", dims=None, engine="batched", threads=None, params=None, seed=0, cache_dir=None,
          disable=None):
    """The same for a model's text; ``name`` names it in messages."""
    m = Model(_native(text, True, name, dims, disable, engine, threads, cache_dir), params, seed)
    m._source = (text, name, dims, dict(engine=engine, threads=threads, cache_dir=cache_dir, disable=disable))
    return m
