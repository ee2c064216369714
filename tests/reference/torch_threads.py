"""How many threads the PyTorch baselines use, all of them: PyTorch's intra-op threads and those of
the BLAS it calls. Debian's PyTorch runs its GEMMs in OpenBLAS (pthreads build), whose own pool
`torch.set_num_threads` does not touch: left alone, a "one-thread" baseline ran its GEMMs on every
core (measured here: the encoder layer on MNLI at batch 64, sorted micro-batches, 108 useful
GFLOP/s against 79 with OpenBLAS held to one thread)."""

import ctypes
import os
import platform
import subprocess
import sys

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


def blas_core():
    """The kernel set ("core") OpenBLAS runs in this process, as openblas_get_corename names it."""
    for lib in blas_libraries():
        try:
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except AttributeError:
            pass
    return "?"


def match_blas_core():
    """Gives the baseline's OpenBLAS the kernels acrobat's runs (src/kernels/backend.cpp,
    fix_openblas_core, holds the rule and why): OpenBLAS 0.3.21 falls back to its SSE3 "Prescott"
    kernels on CPUs it does not know, such as an Emerald Rapids Xeon; there PyTorch's sgemm ran at
    20-30 GFLOP/s on one thread and 107-125 with OPENBLAS_CORETYPE=SkylakeX (a [3400, 512] by [512,
    2048] product, measured here). acrobat re-runs the selection with the newest set the CPU's
    instructions support, and leaves its choice in OPENBLAS_CORETYPE for the processes it starts;
    here the same rule is applied, so that both sides of a comparison run the same sgemm. A core the
    user forced through OPENBLAS_CORETYPE is kept."""
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if blas_core() != "Prescott" and not forced:
        return
    if not forced:
        flags = cpu_flags()
        if {"avx512f", "avx512vl"} <= flags:
            forced = "SkylakeX"
        elif {"avx2", "fma"} <= flags:
            forced = "Haswell"
        else:
            return
    if blas_core().lower() == forced.lower():
        return
    os.environ["OPENBLAS_CORETYPE"] = forced
    for lib in blas_libraries():
        try:
            lib.gotoblas_dynamic_quit()
            lib.gotoblas_dynamic_init()
        except AttributeError:  # a build without DYNAMIC_ARCH: one core only
            pass


def cpu_flags():
    """This CPU's feature flags, as /proc/cpuinfo lists them."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_name():
    """The CPU's model name, as lscpu prints it."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def set_threads(threads, blas=None):
    """PyTorch's intra-op threads and OpenBLAS's: `threads` for both, or `blas` for OpenBLAS's; and
    OpenBLAS's kernels those acrobat runs (match_blas_core)."""
    match_blas_core()
    torch.set_num_threads(threads)
    for lib in blas_libraries():
        lib.openblas_set_num_threads(threads if blas is None else blas)


def splits(threads):
    """The ways to give a baseline `threads` cores, as (PyTorch's intra-op threads, OpenBLAS's
    threads). Both pools at once can be the slowest: PyTorch's OpenMP threads spin after each
    parallel region while OpenBLAS's own threads want the same cores (measured here: the Tree-LSTM
    hand-batched by height, H 256, batch 64, training: 190-220 trees/s with both at 2 threads, 340-420
    with both at 1, 495-505 with PyTorch's at 2 and OpenBLAS's at 1, 595 with PyTorch's at 1 and
    OpenBLAS's at 2). A baseline with more than one thread should run in the fastest of them."""
    if threads <= 1:
        return [(1, 1)]
    return [(threads, threads), (threads, 1), (1, threads)]


# glibc's mmap and trim thresholds raised, so that freed memory stays in the heap and is reused (the
# setting a tuned deployment would use; bench/ragged_pytorch.py's docstring measures why).
MALLOC_RETAIN = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736"}


def retain_freed_memory(script):
    """Re-executes `script` (the running baseline) with MALLOC_RETAIN, unless it is set already;
    glibc reads it only at start-up."""
    if all(os.environ.get(k) == v for k, v in MALLOC_RETAIN.items()):
        return
    env = dict(os.environ, **MALLOC_RETAIN)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(script)] + sys.argv[1:], env)
