// The ahead-of-time backend's code generator: a module with its plan becomes one C++ translation
// unit against include/acrobat/aot.h, holding
//  - the host program: one C++ function per IR function, with host values as aot::Val, data-type
//    values in the run's arena, recording each static block execution as one dataflow-graph node
//    (the runtime computes its depth inline), ghost operations and phase ends where the plan puts
//    them, and user errors reported by IR site;
//  - one batched kernel per static block: elementwise chains fused into one pass over each
//    instance's row that reads scattered arguments through their row pointers and keeps
//    intermediates in registers; matmuls by reuse weights as one GEMM over the whole batch on the
//    pre-packed weights, with the bias written first; other operators through the runtime.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace acrobat::codegen {

// 16 hex digits of the 64-bit FNV-1a hash of `text` (generated code and compile-cache keys).
std::string content_hash(const std::string& text);

struct GeneratedCpp {
  std::string source;
  std::string hash;  // 16 hex digits, FNV-1a of the source; embedded in the source as well
};

// The module must carry a plan (compile_model attaches one).
GeneratedCpp emit_cpp(const ir::Module& module);

}  // namespace acrobat::codegen
