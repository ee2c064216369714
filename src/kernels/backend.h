// Process-wide setup of the third-party libraries behind the kernels (OpenBLAS, libxsmm), done once
// before their first use.
#pragma once

#include <string>

namespace acrobat::kernels {

// Idempotent and thread-safe; every entry point that calls OpenBLAS or libxsmm calls it first.
void ensure_backend_ready();

// Whether libxsmm's JIT targets AVX-512 while OpenBLAS runs a core without it (one forced through
// OPENBLAS_CORETYPE, such as Haswell on an AVX-512 machine): its sgemm then reaches about half of
// the FMA peak, and the products that take sgemm for speed take the JIT kernels where they can.
bool blas_narrower_than_jit();

// "OpenBLAS <core>, libxsmm <target>": what the benchmarks actually measured.
std::string backend_description();

// This core's fp32 multiply-add throughput in GFLOP/s: independent FMA chains on the widest vectors
// the build targets, run for about `seconds`. No kernel on one thread can beat it; the benchmarks
// state their figures against it.
double fma_peak_gflops(double seconds = 0.2);

// The memory bandwidth `threads` threads reach reading (GB/s, 1e9 bytes): the best of repeated sums
// over 256 MiB, each thread its own part, with vector loads. A kernel whose data must come from
// memory cannot run faster than its bytes at this rate; the benchmarks state memory-bound figures
// against it. (256 MiB is past the caches that matter: on an Intel Xeon with 2 MiB of L2 and 480
// MiB of L3 reported, one thread read 88 GB/s from 1 MiB, 28 from 8 to 32 MiB, 13-14 from 128 MiB
// to 2 GiB.)
double read_bandwidth_gbs(int threads = 1, double seconds = 0.3);

}  // namespace acrobat::kernels
