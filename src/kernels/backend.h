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

}  // namespace acrobat::kernels
