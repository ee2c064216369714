"""The set of oracle models: the three built-in SST models of models.py and every
`model_<name>.py` module beside this file.

A model module exposes (names fixed: other modules are written to them):

  NAME = "nestedrnn"             # the acrobat model is <repo>/models/<NAME>.acr
  SOURCE = "gpt"                 # OPTIONAL: the model is <repo>/models/<SOURCE>.acr instead
  ENTRY = "beam"                 # OPTIONAL: the entry acrobat runs (default main)
  DIMS = {"H": 256, ...}         # default dims (acrobat `dim`s), overridable with --set K=V
  INPUT_KIND = "json"            # acrobat --input kind: "sst", "sst-tokens", "tokens" or "json"
  LOSS_INPUT_KIND = "json"       # OPTIONAL: the loss entry's input kind (default INPUT_KIND)
  class Model(torch.nn.Module):  # PARAM_ORDER = parameter names = acrobat param names
      def __init__(self, **dims)
      def forward(self, instance) # what acrobat's main returns: a tensor, or a tuple/list of
                                  # tensors/ints/floats/bools (nested)
  def init_params(model, seed)    # deterministic
  def make_data(path, count, seed, dims)            # OPTIONAL: writes `count` synthetic instances
  def load_instances(path, vocab_path, limit, dims) # python instances from the file acrobat reads
  def output_entry(y)             # OPTIONAL: JSON value as acrobat's --output writes it
  def make_loss_data(path, count, seed, dims)       # OPTIONAL: synthetic labelled instances for the
                                                    # model's `loss` entry (json models)
  def load_loss_instances(path, vocab_path, limit, dims)  # OPTIONAL: those, for Model.loss
                                  # (default: default_output_entry below, which handles the above)

Optional, for models whose control flow depends on tensor values (see README, "Decisions"): a
Model with a `margins` attribute (a list) appends to it the margin of every decision it takes;
the harness empties it before each instance and records the per-instance minimum (or a
`last_margins` list that forward resets itself).

get(name) returns a Spec with those attributes (make_data None when absent) for any model.
"""

import glob
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import models  # noqa: E402
import sst  # noqa: E402

BUILTIN = ("treelstm", "mvrnn", "birnn")
INPUT_KINDS = ("sst", "sst-tokens", "tokens", "json")
SST_VOCAB_SIZE = 21702  # lines of data/sst/vocab.txt; the harness sets V from the vocabulary


def names():
    """Every model name: the built-ins and the model_*.py modules (found by file name, not
    imported, so a module being written cannot break the others)."""
    found = set(BUILTIN)
    for path in glob.glob(os.path.join(HERE, "model_*.py")):
        found.add(os.path.basename(path)[len("model_"):-len(".py")])
    return sorted(found)


class Spec:
    def __init__(self, **kw):
        self.NAME = kw["NAME"]
        self.DIMS = dict(kw["DIMS"])
        self.INPUT_KIND = kw["INPUT_KIND"]
        self.SOURCE = kw.get("SOURCE", self.NAME)
        self.ENTRY = kw.get("ENTRY")
        self.Model = kw["Model"]
        self.init_params = kw["init_params"]
        self.make_data = kw.get("make_data")
        self.load_instances = kw["load_instances"]
        self.output_entry = kw.get("output_entry") or default_output_entry
        self.make_loss_data = kw.get("make_loss_data")
        self.load_loss_instances = kw.get("load_loss_instances")
        self.LOSS_INPUT_KIND = kw.get("LOSS_INPUT_KIND", self.INPUT_KIND)
        for kind in (self.INPUT_KIND, self.LOSS_INPUT_KIND):
            if kind not in INPUT_KINDS:
                raise ValueError("model %s: input kind %r is not one of %s"
                                 % (self.NAME, kind, ", ".join(INPUT_KINDS)))

    @property
    def reads_vocab(self):
        return self.INPUT_KIND in ("sst", "sst-tokens")


def default_output_entry(y):
    """A model output as acrobat's --output writes it: a tensor as {"shape", "data"} (float32
    values as exact doubles), a tuple or list as an array, ints, floats and bools as themselves."""
    import torch

    if isinstance(y, torch.Tensor):
        y = y.detach().to(torch.float32).contiguous()
        return {"shape": list(y.shape), "data": [float(v) for v in y.reshape(-1).tolist()]}
    if isinstance(y, (tuple, list)):
        return [default_output_entry(v) for v in y]
    if isinstance(y, bool):
        return y
    if isinstance(y, int):
        return int(y)
    if isinstance(y, float):
        return float(y)
    raise TypeError("cannot write a model output of type %s" % type(y).__name__)


def _builtin(name):
    cls, defaults = models.MODELS[name]

    def load_instances(path, vocab_path, limit, dims):
        vocab, V = sst.load_vocab(vocab_path)
        if V != dims["V"]:
            raise ValueError("vocabulary %s has %d words but V = %d" % (vocab_path, V, dims["V"]))
        trees = [sst.index_tree(t, vocab) for t in sst.load_trees(path, limit)]
        return [models.make_instance(name, t) for t in trees]

    return Spec(NAME=name, DIMS=dict(defaults, V=SST_VOCAB_SIZE), INPUT_KIND=models.INPUT_KIND[name],
                Model=lambda **dims: cls(**dims), init_params=models.init_params,
                load_instances=load_instances)


_cache = {}


def get(name):
    """The Spec of model `name` (ValueError if unknown or malformed)."""
    if name in _cache:
        return _cache[name]
    if name in BUILTIN:
        spec = _builtin(name)
    else:
        if not os.path.isfile(os.path.join(HERE, "model_%s.py" % name)):
            raise ValueError("unknown model %r (expected one of %s)" % (name, ", ".join(names())))
        mod = importlib.import_module("model_%s" % name)
        missing = [a for a in ("NAME", "DIMS", "INPUT_KIND", "Model", "init_params", "load_instances")
                   if not hasattr(mod, a)]
        if missing:
            raise ValueError("model_%s.py lacks %s" % (name, ", ".join(missing)))
        if mod.NAME != name:
            raise ValueError("model_%s.py has NAME = %r" % (name, mod.NAME))
        spec = Spec(**{a: getattr(mod, a) for a in ("NAME", "DIMS", "INPUT_KIND", "Model", "init_params",
                                                     "make_data", "load_instances", "output_entry",
                                                     "make_loss_data", "load_loss_instances",
                                                     "LOSS_INPUT_KIND", "SOURCE", "ENTRY")
                       if hasattr(mod, a)})
    _cache[name] = spec
    return spec


def resolve_dims(spec, overrides, vocab_path=None):
    """The spec's default dims updated with `overrides` (validated). A dim whose default is None
    follows H (the built-ins' E). For models that read the SST vocabulary, V is the vocabulary's
    size unless set explicitly."""
    dims = dict(spec.DIMS)
    for k, v in overrides.items():
        if k not in dims:
            raise ValueError("model %s has no dim %r (dims: %s)" % (spec.NAME, k, ", ".join(dims)))
        if v <= 0:
            raise ValueError("dim %s must be positive, got %d" % (k, v))
        dims[k] = v
    for k in dims:
        if dims[k] is None:
            dims[k] = dims["H"]
    if spec.reads_vocab and "V" in dims and "V" not in overrides and vocab_path:
        dims["V"] = sst.load_vocab(vocab_path)[1]
    return dims


parse_sets = models.parse_sets


def setup_run(model_name, sets, data, vocab, limit, workdir, seed=0, loss=False):
    """What the end-to-end checks start from: (spec, dims, instances, model, weights path). The model
    is initialised from `seed`, written to WORKDIR/params.safetensors and read back, so that it holds
    exactly the weights acrobat reads; the instances are the first `limit` of `data` (with `loss`,
    read for the loss entry: load_loss_instances where the model has one)."""
    import models
    import safetensors_io

    spec = get(model_name)
    dims = resolve_dims(spec, sets, vocab)
    load = spec.load_loss_instances if loss and spec.load_loss_instances else spec.load_instances
    instances = load(data, vocab, limit, dict(dims))
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "params.safetensors")
    safetensors_io.save_file(models.state_tensors(spec.init_params(spec.Model(**dims), seed)), path,
                             {"model": model_name})
    tensors, _ = safetensors_io.load_file(path)
    return spec, dims, instances, models.load_tensors(spec.Model(**dims), tensors), path


class OracleStamp:
    """What the oracle's files in a directory were made for (a JSON file beside them): check_model.py
    and check_grad.py --oracle-only write the files once, and --oracle DIR reads them for each
    engine's test only when they were made for the same arguments (ctest's pytorch.oracle.*
    fixtures, tests/models/CMakeLists.txt)."""

    def __init__(self, path, made_for):
        self.path, self.made_for = path, json.loads(json.dumps(made_for))  # as JSON reads it back

    def clear(self):
        """Before the oracle writes: an earlier oracle's files are not this one's until it is done."""
        if os.path.exists(self.path):
            os.remove(self.path)

    def write(self):
        with open(self.path, "w") as f:
            json.dump(self.made_for, f)

    def problem(self, script):
        """None when the files were made for these arguments, else what is wrong."""
        try:
            with open(self.path) as f:
                made = json.load(f)
        except (OSError, ValueError) as e:
            return "no oracle in %s (%s): run %s --oracle-only there first" % (os.path.dirname(self.path), e, script)
        if made != self.made_for:
            return "the oracle in %s was made for other arguments (%s)" % (os.path.dirname(self.path), self.path)
        return None


def acrobat_tensors(cmd, path, who):
    """Runs the acrobat command line `cmd` (echoing it and its output to stderr) and reads the
    safetensors file it writes at `path`: (tensors, metadata), or None when it failed."""
    import subprocess

    import safetensors_io

    print("%s: %s" % (who, " ".join(cmd)), file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print("%s: %s failed (exit %d)" % (who, " ".join(cmd[:2]), proc.returncode), file=sys.stderr)
        return None
    return safetensors_io.load_file(path)


def compare_params(names, expected, got, rtol, scale_fraction):
    """Per param `name` of `names`: expected[name] (a torch tensor) against got[name], element-wise
    |got - expected| <= rtol * (|expected| + scale) with scale = scale_fraction * the largest
    |expected| of that param, so that an entry small against its param is held to the param's
    precision. Returns (problems: messages, worst scaled error)."""
    import torch

    problems, worst = [], 0.0
    for name in names:
        e = expected[name].detach().to(torch.float64).reshape(-1)
        if name not in got:
            problems.append("no tensor %s" % name)
            continue
        a = got[name].to(torch.float64).reshape(-1)
        if a.numel() != e.numel():
            problems.append("%s: %d entries, expected %d" % (name, a.numel(), e.numel()))
            continue
        scale = float(e.abs().max()) * scale_fraction
        err = (a - e).abs() / (e.abs() + scale + 1e-30)
        worst = max(worst, float(err.max()))
        bad = int((err > rtol).sum())
        if bad:
            i = int(err.argmax())
            problems.append("%s: %d of %d entries differ; worst at %d: %.9g, expected %.9g"
                            % (name, bad, e.numel(), i, float(a[i]), float(e[i])))
    return problems, worst
