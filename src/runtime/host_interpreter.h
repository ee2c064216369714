// The interpreted engine's host program: runs the IR of one instance over aot::Val, through the
// aot::AotHost services of its context, exactly as the generated host program does
// (codegen/emit_cpp.cpp): host values are 16-byte Vals, tuples, data-type values and closures are
// Obj records in the run's object arena, each execution of a static block becomes one graph node
// whose operator results are lazy tensors, and a tensor read, a group of concurrent calls or an
// error goes to the runtime (runtime/host_runtime.h). A frame is the function's variables on the
// machine stack of the instance's fiber, so concurrent calls of one instance need no bookkeeping.
// Nothing here allocates from the heap while an instance runs.
#pragma once

#include <cstdint>
#include <vector>

#include "acrobat/aot.h"
#include "ir/ir.h"

namespace acrobat {

class HostInterpreter {
 public:
  explicit HostInterpreter(const ir::Module& module);

  // Calls function `func` (one parameter, no captures) on `input`.
  aot::Val call(aot::AotContext* ctx, int32_t func, aot::Val input);

 private:
  struct Member;
  static void run_member(aot::AotContext* ctx, void* env);

  // Runs function `func` on `frame`, whose parameters the caller has set.
  aot::Val invoke(aot::AotContext* ctx, int32_t func, aot::Val* frame);
  aot::Val block(aot::AotContext* ctx, const ir::Block& b, aot::Val* frame);
  void binding(aot::AotContext* ctx, const ir::Binding& bind, aot::Val* frame);
  aot::Val call_binding(aot::AotContext* ctx, const ir::Rhs& r, aot::Val* frame);
  size_t record(aot::AotContext* ctx, const ir::Block& b, size_t begin, aot::Val* frame);
  size_t concurrent(aot::AotContext* ctx, const ir::Block& b, size_t begin, size_t n,
                    aot::Val* frame);
  aot::Val host_op(aot::AotContext* ctx, const ir::Rhs& r, const aot::Val* frame) const;
  static bool matches(const ir::Pattern& p, aot::Val v);
  static void bind_pattern(const ir::Pattern& p, aot::Val v, aot::Val* frame);
  // Ghost levels (pad > 0) or a phase end (pad < 0) for every tensor `v` of `type` holds directly
  // or in tuples (tuples are copied, not changed).
  static void adjust(aot::AotContext* ctx, aot::Val& v, const Type& type, int pad);

  aot::Val atom(aot::AotContext* ctx, const ir::Atom& a, const aot::Val* frame) const;

  // Per IR site, what the interpreter needs at run time beyond the node itself.
  enum SiteFlag : uint8_t {
    kBlockStart = 1,   // the first binding of a static block
    kGroupStart = 2,   // the first member of a group of concurrent calls
    kBatchedOp = 4,    // a tensor operator a static block computes (a lazy result)
    kConstant = 8,     // a constant tensor operator (computed once, by the runtime)
    kEndsPhase = 16,   // a call whose result ends a phase
    kGhosts = 32,      // an if or match with ghost levels on some branch
    kIntArgs = 64,     // a host operator on ints
    kBoolArgs = 128,   // a host operator on bools
  };
  const ir::Module& m_;
  std::vector<uint8_t> flags_;         // by site
  std::vector<int64_t> read_sizes_;  // by site: elements of a tensor-to-host read's operand
};

}  // namespace acrobat
