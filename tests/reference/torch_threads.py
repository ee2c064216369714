"""How many threads the PyTorch baselines use, all of them: PyTorch's intra-op threads and those of
the BLAS it calls. Debian's PyTorch runs its GEMMs in OpenBLAS (pthreads build), whose own pool
`torch.set_num_threads` does not touch: left alone, a "one-thread" baseline ran its GEMMs on every
core (measured here: the encoder layer on MNLI at batch 64, sorted micro-batches, 108 useful
GFLOP/s against 79 with OpenBLAS held to one thread)."""

import ctypes
import os

import torch

_blas = None


def blas_libraries():
    """The OpenBLAS libraries loaded into this process (from /proc/self/maps), as ctypes handles
    that have openblas_set_num_threads."""
    global _blas
    if _blas is None:
        paths = set()
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "openblas" in path and (path.endswith(".so") or ".so." in path):
                    paths.add(path)
        _blas = []
        for path in sorted(paths):
            try:
                lib = ctypes.CDLL(path)
                lib.openblas_set_num_threads  # raises AttributeError when absent
                _blas.append(lib)
            except (OSError, AttributeError):
                pass
    return _blas


def set_threads(threads):
    torch.set_num_threads(threads)
    for lib in blas_libraries():
        lib.openblas_set_num_threads(threads)
