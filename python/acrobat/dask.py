"""Scale-out on Dask: a model run over a dataset split across Dask workers.

    import dask.bag as db
    from dask.distributed import Client
    import acrobat, acrobat.dask

    client = Client("tcp://scheduler:8786")               # or Client(LocalCluster(...)) on one machine
    m = acrobat.load("models/treelstm.acr")
    trees = m.read_values("sst:data/sst/test.txt")        # Python values, picklable
    bag = db.from_sequence(trees, partition_size=256)
    outputs = acrobat.dask.map_batches(bag, "models/treelstm.acr", params="W.safetensors").compute()

Each worker process loads the model once (per distinct model, dims, engine and params) and runs its
partitions in batches of ``batch`` instances; the outputs come back in the bag's order. On a real
cluster every worker needs the package installed (the same set-up as here) and the model and params
files at the same paths (a shared file system), or params as a mapping of arrays, which Dask ships to
the workers. A partition whose size is a multiple of ``batch`` is cut into the batches a single
``acrobat run --batch`` over the same instances runs, so the outputs are the same bits. An error
names the instance by its index in the whole bag (the partitions' sizes are counted first, a cheap
step that each partition's run waits for only as far as the partitions before it). With
``on_error="skip"`` an instance that fails does not fail the compute: its place in the outputs holds
a ``Skipped(instance, error)`` (its index in the whole bag and the message) and the others' outputs
are as usual.
"""

import operator
import os
import threading
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Union

import acrobat

class Skipped(NamedTuple):
    """In map_batches' outputs with on_error="skip": the instance that failed, by its index in the
    whole bag, and the error's message."""
    instance: int
    error: str


_models: "dict[tuple, acrobat.Model]" = {}  # per worker process: key -> acrobat.Model
_lock = threading.Lock()


def _key(model: Any, dims: Optional[Mapping[str, int]], engine: str, threads: Optional[int], params: Any, seed: int,
         cache_dir: Optional[str]) -> tuple:
    from dask.base import tokenize

    p = os.path.abspath(os.fspath(params)) if isinstance(params, (str, os.PathLike)) else tokenize(params)
    return (os.path.abspath(os.fspath(model)), tuple(sorted((dims or {}).items())), engine, threads, p, seed,
            cache_dir)


def _load(key: tuple, model: Any, dims: Optional[Mapping[str, int]], engine: str, threads: Optional[int],
          params: Any, seed: int, cache_dir: Optional[str]) -> acrobat.Model:
    with _lock:
        m = _models.get(key)
        if m is None:
            m = _models[key] = acrobat.load(model, dims=dims, engine=engine, threads=threads, params=params,
                                            seed=seed, cache_dir=cache_dir)
        return m


def _first_indices(bag: Any) -> Any:
    """A bag of one number per partition of ``bag``: the index in the whole bag of its first element."""
    import dask
    import dask.bag as dask_bag

    sizes = bag.map_partitions(lambda items: [len(list(items))]).to_delayed()
    firsts, total = [], 0
    for size in sizes:
        firsts.append(dask.delayed(lambda n: [n])(total))
        total = dask.delayed(operator.add)(total, dask.delayed(operator.itemgetter(0))(size))
    return dask_bag.from_delayed(firsts)


def map_batches(bag: Any, model: Union[str, "os.PathLike[str]"], params: Any = None,
                dims: Optional[Mapping[str, int]] = None, engine: str = "batched", threads: Optional[int] = 1,
                batch: int = 64, entry: str = "main", seed: int = 0, cache_dir: Optional[str] = None,
                on_error: str = "raise") -> Any:
    """A dask.bag of the outputs of ``entry`` on every instance of ``bag`` (Python values, as
    Model.run takes them; Model.read_values reads files into them). ``model``: the model file's
    path; ``params``: a safetensors path, a mapping of name to array, or None (from ``seed``);
    ``threads``: per worker process (default 1: one process per core is Dask's usual layout);
    ``on_error``: "raise" (an instance that fails fails the compute) or "skip" (a Skipped in its place)."""
    if on_error not in ("raise", "skip"):
        raise acrobat.Error("on_error=%r: expected 'raise' or 'skip'" % (on_error,))
    key = _key(model, dims, engine, threads, params, seed, cache_dir)

    def run_partition(items: Iterable[Any], first: Iterable[int]) -> list:
        m = _load(key, model, dims, engine, threads, params, seed, cache_dir)
        items = list(items)
        if not items:
            return []
        start = list(first)[0]  # the index of items[0] in the whole bag
        outputs, stats = m.run(items, batch=batch, entry=entry, first_index=start, on_error=on_error)
        for f in stats.get("failures", ()):
            outputs[f["instance"] - start] = Skipped(f["instance"], f["error"])
        return outputs

    return bag.map_partitions(run_partition, _first_indices(bag))
