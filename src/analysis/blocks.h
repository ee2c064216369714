// Static blocks: maximal runs of tensor operators in one IR block with no host control flow between
// them (a call, if, match or tensor-to-host read ends a run). One static block is one fused batched
// kernel at run time and one node of the dataflow graph per execution. Everything about a block that
// does not depend on the instances is decided here, once: which operands are the block's own
// intermediate values and which are arguments, which outputs escape, which slices are views, which
// matmul + bias pairs fuse, and how each argument is read (its mode, from the reuse analysis).
#pragma once

#include <string>
#include <vector>

#include "analysis/reuse.h"
#include "ir/ir.h"

namespace acrobat::analysis {

struct BlockOperand {
  bool local;  // the output of an earlier operator of the block, else an argument
  int index;   // operator index, or argument index
};

struct BlockOp {
  const ir::Rhs* rhs;
  int var;  // the IR variable the operator defines
  std::vector<BlockOperand> operands;
  std::vector<int64_t> shape;  // may have size variables (the block's `sizes`)
  int64_t size = 0;            // elements per instance; 0 when the shape has size variables
  bool escapes = false;  // code after the block reads it: it outlives its batch
  // A slice of a leading-1 region of an operator of the block is not copied: its output is a view
  // into the operand's rows.
  bool view = false;
  // A matmul by reuse weights whose only use is the next operator, an add of an argument row (a
  // bias): the matmul accumulates onto the broadcast bias and the add is not executed.
  int bias_arg = -1;   // on the matmul: the add's bias argument
  bool fused = false;  // on the add
};

struct BlockArg {
  int var;  // the IR variable read
  std::vector<int64_t> shape;
  // How the batch reads it. `known` is false when the reuse analysis did not run: the engine then
  // discovers per batch whether the B values are one tensor, adjacent rows, or scattered.
  ArgMode mode = ArgMode::Scatter;
  bool known = false;
  int param = -1;            // reuse/indexed: the parameter; -1 for a constant
  bool weights_only = true;  // read only as a matmul's right operand
  bool concat_only = true;   // read only by concat (copied from where it lies, never gathered)
  bool may_be_lazy = true;   // can hold a tensor computed by the dataflow graph (else: parameter,
                             // embedding row or constant, ready before any batch runs)
};

struct StaticBlock {
  int id;
  std::string name;  // where its first batched operator is in the model, "file:line:col"
  int function;      // index into Module::functions
  const ir::Block* block;  // in the module the plan was made for (its functions are not copied)
  size_t begin, end;  // bindings [begin, end) of `block`; the block starts at a tensor operator
  std::vector<BlockOp> ops;  // the batched operators (tensor operands); constants are not here
  std::vector<BlockArg> args;
  int64_t flops = 0;  // one execution (of the operators without size variables)
  // The size variables in the shapes of its operators and arguments (types.h), and the host int
  // variables holding their values, which the host program records with each execution. A block
  // with some is ragged: its instances' shapes differ, and it runs through runtime/ragged_blocks.h.
  std::vector<int64_t> sizes;
  std::vector<int> size_vars;
  bool ragged() const { return !sizes.empty(); }
  // Depth of the block relative to the start of its phase when it is fixed by the program: 1 when
  // no argument can be a pending tensor; 0 when it is computed at run time (1 + the deepest input).
  int static_depth = 0;
};

// Where a view (BlockOp::view) starts in each instance's value of the operator it views, in floats.
int64_t view_offset(const StaticBlock& s, const BlockOp& op);

// Forms the static blocks of every function of `module`. `reuse` (nullable) gives argument modes.
// Block ids are their indices in the result.
std::vector<StaticBlock> form_static_blocks(const ir::Module& module, const ReuseInfo* reuse);

// True for a binding that starts or continues a static block: a tensor operator other than a
// tensor-to-host read.
bool is_tensor_op(const ir::Rhs& r);
// Tensor operators with tensor operands, or with sizes (zeros(n, D)); constants (no operands,
// fixed shapes) are evaluated once per engine.
bool is_batched_op(const ir::Rhs& r);
// Bindings that end a static block: calls, ifs, matches, tensor-to-host reads.
bool ends_block(const ir::Rhs& r);

}  // namespace acrobat::analysis
