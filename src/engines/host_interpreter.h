// The interpreted engine's host program: runs the IR of one instance over aot::Val, through the
// aot::AotHost services of its context, exactly as the generated host program does
// (codegen/emit_host.cpp): host values are 16-byte Vals, tuples, data-type values and closures are
// Obj records in the run's object arena, each execution of a static block becomes one graph node
// whose operator results are lazy tensors, and a tensor read, a group of concurrent calls or an
// error goes to the runtime (engines/host_runtime.h).
//
// The IR is first translated into a compact code: one 40-byte instruction per binding, the
// instructions of a block contiguous, every operand a frame slot or an entry of a constant pool, and
// what the plan says of a binding (block start, concurrent group, phase end, ghosts, references to
// hand over or give up) in its flags;
// running it touches a few cache lines per binding instead of the IR's scattered nodes. A frame is
// the function's variables on the machine stack of the instance's fiber, so concurrent calls of one
// instance need no bookkeeping. Nothing here allocates from the heap while an instance runs.
#pragma once

#include <cstdint>
#include <vector>

#include "acrobat/aot.h"
#include "analysis/ownership.h"
#include "ir/ir.h"
#include "engines/host_runtime.h"

namespace acrobat {

class HostInterpreter {
 public:
  explicit HostInterpreter(const ir::Module& module);

  // Calls function `func` (no captures) with its parameters `args` (an entry function: the
  // instance, then its sizes).
  aot::Val call(aot::AotContext* ctx, int32_t func, const aot::Val* args);

 private:
  enum Flag : uint16_t {
    kBlockStart = 1,  // the first binding of a static block (extra: the block's id)
    kGroupStart = 2,  // the first member of a group of concurrent calls (extra: members)
    kBatchedOp = 4,   // a tensor operator a static block computes (a lazy result)
    kConstant = 8,    // a constant tensor operator (computed once, by the runtime)
    kEndsPhase = 16,  // a call whose result ends a phase
    kGhosts = 32,     // an if or match with ghost levels on some branch
    kIntArgs = 64,    // a host operator on ints
    kBoolArgs = 128,  // a host operator on bools
    kTail = 256,      // a tail call (analysis/tail_calls.h): the body runs again on its arguments
    kOwns = 512,      // dups or drops at its site (analysis/ownership.h)
  };
  // An operand: >= 0 a frame slot, < 0 the constant pool's entry -1 - o.
  using Operand = int32_t;
  struct Instr {
    ir::RhsKind kind;
    uint16_t flags = 0;
    uint16_t num_args = 0;
    int32_t var = 0;      // the variable defined
    int32_t args = 0;     // the first operand in operands_
    int32_t x = 0;        // Call: callee or -1; Construct, MakeTuple, MakeClosure: tag; Proj,
                          // ParamLoad, ParamIndex: index; Host: operator; Match: clauses
    int32_t y = 0;        // Call: the closure operand; If: then block (else: y + 1); Match: first
                          // clause in clauses_
    int32_t extra = 0;    // see kBlockStart, kGroupStart
    int32_t site = 0;
    const ir::Rhs* rhs = nullptr;  // for what is rare: types, read sizes, ghost levels
  };
  struct CodeBlock {
    int32_t begin = 0, end = 0;  // into code_
    Operand result = 0;
    analysis::VarList drops;  // on entry
    bool dup_result = false;
  };
  // A pattern node; a constructor's or tuple's sub-patterns are pats_[first, first + count).
  struct Pat {
    ir::Pattern::Kind kind;
    int32_t tag = 0;   // Ctor
    int32_t var = -1;  // Bind
    int32_t first = 0, count = 0;
  };
  struct Clause {
    int32_t pattern;  // into pats_
    int32_t block;
  };
  struct Function {
    int32_t body = 0;
    size_t num_vars = 0;
    int32_t num_captures = 0;
    std::vector<int32_t> params;
    std::vector<uint8_t> dup_capture;  // per capture: handed over from the closure on a call
  };
  struct Member;

  // Translation.
  // Translates `b` (of `f`) into block `id` (reserved by the caller, so that an if's two blocks and
  // a match's clauses are adjacent); `own` is its ownership actions (null: none).
  void compile_block(const ir::Function& f, const ir::Block& b, int32_t id,
                     const analysis::BlockOwnership* own);
  Operand operand(const ir::Atom& a);
  // Translates `p` into pats_[at].
  void compile_pattern(const ir::Pattern& p, int32_t at);
  uint16_t flags_of(const ir::Function& f, const ir::Rhs& r) const;

  // Execution.
  aot::Val invoke(aot::AotContext* ctx, int32_t func, aot::Val* frame);
  aot::Val run_block(aot::AotContext* ctx, int32_t block, aot::Val* frame);
  void run(aot::AotContext* ctx, const Instr& in, aot::Val* frame);
  aot::Val call_instr(aot::AotContext* ctx, const Instr& in, aot::Val* frame);
  int32_t record(aot::AotContext* ctx, int32_t at, aot::Val* frame);
  int32_t concurrent(aot::AotContext* ctx, int32_t at, aot::Val* frame);
  aot::Val host_op(aot::AotContext* ctx, const Instr& in, const aot::Val* frame) const;
  // A tensor-to-host read (argmax, item, sample); one of a shape or seed that differs per instance
  // has x = -1, y its tensor's shape in read_shapes_, and the sizes' values after its operands.
  aot::Val read(aot::AotContext* ctx, const Instr& in, aot::Val* frame) const;
  static void run_member(aot::AotContext* ctx, void* env);
  // Hands over (dup) or gives up (drop) the references of the variables of `l`.
  void dup_vars(aot::AotContext* ctx, analysis::VarList l, const aot::Val* frame) const;
  void drop_vars(aot::AotContext* ctx, analysis::VarList l, const aot::Val* frame) const;
  // Whether `v` matches pattern `p`, binding its variables on the way (the variables of a clause
  // that turns out not to match are never read).
  bool match(int32_t p, aot::Val v, aot::Val* frame) const;
  // Ghost levels (pad > 0) or a phase end (pad < 0) for every tensor `v` of `type` holds directly
  // or in tuples (tuples are copied, not changed).
  static void adjust(aot::AotContext* ctx, aot::Val& v, const Type& type, int pad);
  aot::Val value(Operand o, const aot::Val* frame) const { return o >= 0 ? frame[o] : pool_[-1 - o]; }

  const ir::Module& m_;
  const analysis::OwnershipPlan* own_;  // null when the analysis is off
  std::vector<Instr> code_;
  std::vector<CodeBlock> blocks_;
  std::vector<Clause> clauses_;
  std::vector<Pat> pats_;
  std::vector<Operand> operands_;
  std::vector<std::vector<int64_t>> read_shapes_;
  std::vector<aot::Val> pool_;  // constants: literals, and functions used as values
  ObjectArena function_values_;  // closures without captures, shared by every run
  std::vector<Function> functions_;
  // A tail call's arguments, until the loop in invoke() takes them. Host programs run on one thread
  // and nothing between the request and the loop suspends a fiber, so one slot serves every instance.
  bool tail_pending_ = false;
  std::vector<aot::Val> tail_args_;
};

}  // namespace acrobat
