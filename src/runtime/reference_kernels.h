// One kernel per registry operator (src/ops/ops.def) for the engines that execute operators one at a
// time: it reads its operands and writes an output the caller allocated with the shape the type
// checker derived. Host reads (argmax, item) write their value as a one-element tensor.
#pragma once

#include <span>

#include "ir/ir.h"
#include "ops/ops.h"
#include "runtime/value.h"

namespace acrobat {

using ReferenceKernel = void (*)(const OpAttrs& attrs, std::span<const Tensor* const> in,
                                 Tensor& out);

ReferenceKernel reference_kernel(OpId op);

// The value of a constant operator (zeros, ones, constant: no operands). The batched engines make
// each once per engine, outside any run's work.
Tensor constant_value(const ir::Rhs& r);

}  // namespace acrobat
