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
``acrobat run --batch`` over the same instances runs, so the outputs are the same bits.
"""

import os
import threading

import acrobat

_models = {}  # per worker process: key -> acrobat.Model
_lock = threading.Lock()


def _key(model, dims, engine, threads, params, seed, cache_dir):
    from dask.base import tokenize

    p = os.path.abspath(os.fspath(params)) if isinstance(params, (str, os.PathLike)) else tokenize(params)
    return (os.path.abspath(os.fspath(model)), tuple(sorted((dims or {}).items())), engine, threads, p, seed,
            cache_dir)


def _load(key, model, dims, engine, threads, params, seed, cache_dir):
    with _lock:
        m = _models.get(key)
        if m is None:
            m = _models[key] = acrobat.load(model, dims=dims, engine=engine, threads=threads, params=params,
                                            seed=seed, cache_dir=cache_dir)
        return m


def map_batches(bag, model, params=None, dims=None, engine="batched", threads=1, batch=64, entry="main", seed=0,
                cache_dir=None):
    """A dask.bag of the outputs of ``entry`` on every instance of ``bag`` (Python values, as
    Model.run takes them; Model.read_values reads files into them). ``model``: the model file's
    path; ``params``: a safetensors path, a mapping of name to array, or None (from ``seed``);
    ``threads``: per worker process (default 1: one process per core is Dask's usual layout)."""
    key = _key(model, dims, engine, threads, params, seed, cache_dir)

    def run_partition(items):
        m = _load(key, model, dims, engine, threads, params, seed, cache_dir)
        items = list(items)
        if not items:
            return []
        outputs, _ = m.run(items, batch=batch, entry=entry)
        return outputs

    return bag.map_partitions(run_partition)
