// Process-wide setup of the third-party libraries behind the kernels (OpenBLAS, libxsmm), done once
// before their first use.
#pragma once

#include <string>

namespace acrobat::kernels {

// Idempotent and thread-safe; every entry point that calls OpenBLAS or libxsmm calls it first.
void ensure_backend_ready();

// "OpenBLAS <core>, libxsmm <target>": what the benchmarks actually measured.
std::string backend_description();

}  // namespace acrobat::kernels
