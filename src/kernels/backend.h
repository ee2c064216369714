// Process-wide setup of the third-party libraries behind the kernels (OpenBLAS, libxsmm), done once
// before their first use.
#pragma once

#include <string>

namespace acrobat::kernels {

// Idempotent and thread-safe; every entry point that calls OpenBLAS or libxsmm calls it first.
void ensure_backend_ready();

// "OpenBLAS <core>, libxsmm <target>": what the benchmarks actually measured.
std::string backend_description();

// This core's fp32 multiply-add throughput in GFLOP/s: independent FMA chains on the widest vectors
// the build targets, run for about `seconds`. No kernel on one thread can beat it; the benchmarks
// state their figures against it.
double fma_peak_gflops(double seconds = 0.2);

// The memory bandwidth one thread reaches reading (GB/s, 1e9 bytes): the best of repeated sums over
// arrays of 256 MiB, far larger than any cache, with vector loads. A kernel whose data must come
// from memory cannot run faster than its bytes at this rate; the benchmarks state memory-bound
// figures against it.
double read_bandwidth_gbs(double seconds = 0.3);

}  // namespace acrobat::kernels
