// The boundary between acrobat's runtime and a model compiled ahead of time (`acrobat compile`):
// the generated C++ includes only this header (and the header-only SIMD math of src/kernels), and
// the shared object exports one C function, acrobat_aot_model(), returning an AotModel.
//
// The generated host program runs one instance at a time. Host values are Val (16 bytes); data-type
// values, tuples and closures are Obj records in a per-run arena. Tensor work is recorded, not done:
// each execution of a static block calls AotContext::record, which returns the new dataflow-graph
// node, and the block's outputs become lazy tensors (node, slot). The runtime later runs every
// bucket of nodes through the block's generated batched kernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace acrobat::aot {

// Bumped whenever any struct below changes; the runtime refuses a model built for another version.
inline constexpr uint32_t kAbiVersion = 11;

struct Obj;

// A host value. Which member is meaningful follows from the IR type, which the generated code knows.
// A tensor is either one that exists (`data`, node -1) or a lazy reference to output `slot` of
// dataflow-graph node `node`; the graph runtime of both engines (runtime/graph.h) takes this as its
// tensor reference. Every other value has node -1, so that a value of a type parameter can be
// told apart from a lazy tensor at run time.
struct Val {
  union {
    int64_t i;          // int; bool as 0/1
    double f;           // float
    Obj* p;             // tuple, data-type value, closure
    const float* data;  // a tensor that exists (parameter, embedding row, constant, input)
    struct {
      int32_t slot;   // which output of the node
      int32_t ghost;  // ghost levels added since the last phase end (analysis/depth.h)
    } lazy;
  };
  int32_t node;        // tensors: the node computing it, or -1 when `data` holds it
  int32_t phase_ends;  // lazy tensors: phase ends passed (analysis/depth.h)
};
static_assert(sizeof(Val) == 16, "Val is two words");

// Ghost levels and phase ends only ever move a value later in the schedule; they saturate instead
// of wrapping, so no program, however long its branches or phases, places a node before its input.
inline void add_ghost_levels(Val& v, int32_t levels) {
  if (v.node < 0) return;
  int64_t g = int64_t{v.lazy.ghost} + levels;
  v.lazy.ghost = g > INT32_MAX ? INT32_MAX : static_cast<int32_t>(g);
}
inline void end_phase(Val& v) {
  if (v.node < 0) return;
  if (v.phase_ends < INT32_MAX) ++v.phase_ends;
  v.lazy.ghost = 0;
}
inline Val lazy_val(int32_t node, int32_t slot) {
  Val v{};
  v.node = node;
  v.lazy.slot = slot;
  return v;
}

// A tuple (tag 0), a data-type value (tag: constructor index), or a closure (tag: function index,
// fields: captured values).
struct Obj {
  int32_t tag;
  int32_t size;
  Val fields[1];  // `size` of them (allocated with room for all)
};

// One block argument for a batch of instances [0, B): instance b's tensor is at data + b * stride
// (stride 0: one tensor shared by all), or at rows[b] when data is null.
struct Operand {
  const float* data;
  int64_t stride;
  const float* const* rows;
  const void* packed;  // reuse weights prepared for GEMM (kernels::PackedWeights), or null
};

struct AotContext;
// One member of a group of concurrent calls: the generated code's closure `env` run with a context.
using MemberFn = void (*)(AotContext* ctx, void* env);

// The runtime's services to generated code, as plain function pointers.
struct AotHost {
  // Host program.
  int32_t (*record)(AotContext* ctx, int32_t block, const Val* args);
  Obj* (*alloc_obj)(AotContext* ctx, int32_t tag, int32_t size);
  const float* (*read_tensor)(AotContext* ctx, Val tensor);  // runs pending work first if needed
  // Runs members[k](ctx_k, envs[k]) for k in [0, n), concurrently when the instance runs on a fiber
  // (analysis/concurrency.h); each gets a context of its own copied from ctx (its call depth).
  // Returns when all have finished; rethrows the error of the lowest k.
  void (*concurrently)(AotContext* ctx, int32_t n, MemberFn const* members, void* const* envs);
  // Throws the user error of IR site `site` (an index out of range, a division by zero, recursion
  // too deep or too long (a call site's b: 0 or 1), no clause matching), with the offending values
  // a and b; does not return.
  void (*fail)(AotContext* ctx, int32_t site, int64_t a, int64_t b);
  // References to lazy tensors (analysis/ownership.h): a host value hands one over to a new owner
  // (dup) or gives its own up (drop), so that the runtime can release a batch output nothing can
  // reach any more. Only for lazy tensors: call them through dup_ref and drop_ref below.
  void (*dup)(AotContext* ctx, Val tensor);
  void (*drop)(AotContext* ctx, Val tensor);
  // The rows of the indexed param of IR site `site` (a gather) that the List[int] `list` of
  // `length` entries picks, one after another, in memory that lasts the run; fails (as `fail`) for
  // an index out of range or an empty list.
  const float* (*gather)(AotContext* ctx, int32_t site, Val list, int64_t length);
  // emit(v) at IR site `site`: hands the host value v (of the site's type) out as a partial result
  // of the context's instance.
  void (*emit)(AotContext* ctx, int32_t site, Val v);
  // Kernels (single-threaded; the runtime splits batches across threads).
  float* (*scratch)(AotContext* ctx, int64_t floats);  // valid until the kernel returns
  // C[M,N] (+)= A[M,K] @ W for reuse weights W, A rows lda apart (the runtime's threads may share
  // it: runtime/shared_products.h).
  void (*gemm_packed)(int64_t M, const float* A, int64_t lda, const void* packed, float* C,
                      int64_t ldc, bool accumulate);
  // Operator `op` of block `block` (any operator the generated code does not compute itself) on
  // instances [0, B) of the given operands, into the contiguous [B, ...] `out`.
  void (*op)(AotContext* ctx, int32_t block, int32_t op, int64_t B, const Operand* in, float* out);
};

// What a kernel call gets: a slice [0, B) of a bucket (the runtime offsets the operands).
struct KernelCall {
  AotContext* ctx;
  const AotHost* host;
  int64_t B;
  const Operand* args;    // one per block argument
  float* const* outputs;  // one per block operator: [B, size] for escaping operators, else null
};
using BlockKernel = void (*)(const KernelCall& call);

// Where the adjoints of an operand go (added to): instance b's at data + b * stride (stride 0: one
// sum for a shared operand), or at rows[b] when data is null (the rows the operand's instances
// were read from get their adjoints where they lie).
struct AdjointTarget {
  float* data;
  int64_t stride;
  float* const* rows;
};

// What the adjoint of one fused loop (a step of kind Fused of the block's kernel plan,
// analysis/kernel_plan.h) gets in the backward pass: instances [0, B). The loop's values are
// recomputed in registers from its operands in memory (analysis::KernelStep::inputs, in that
// order); then, from the last operator back, each operator's adjoint (what the operators after it
// in the loop gave it, plus what it received from outside the loop) goes to its operands: in
// registers to the loop's own, added to memory for the rest.
struct AdjointCall {
  int64_t B;
  const Operand* in;          // per operand in memory: instance b's at data + b * stride (stride 0:
                              // shared) or at rows[b]
  const AdjointTarget* din;   // per operand in memory: where its adjoints are added
  const Operand* dout;        // per operator of the step's range [begin, end) whose value the plan
                              // stores: the adjoint it received from outside the loop (a zero row
                              // of stride 0 for none); unused for the others
};
using FusedAdjoint = void (*)(const AdjointCall& call);

// Per run, what the generated host program reads directly.
struct AotContext {
  const AotHost* host;
  void* runtime;                    // the runtime's own state (opaque to generated code)
  const float* const* params;       // parameter data, by parameter index
  const int64_t* param_counts;      // indexed parameters: entries (0 for a whole parameter)
  const int64_t* param_row_sizes;   // floats per entry
  const float* const* constants;    // constant operators, by IR site
  const int32_t* num_nodes;  // nodes recorded so far in the run (by every instance): the next
                             // record returns this
  int32_t call_depth;
  int32_t max_call_depth;
  // The instance's step budget: its calls so far, loop iterations (tail calls) included, shared by
  // the contexts of its concurrent calls; the most it may make (0: no limit).
  int64_t* steps;
  int64_t max_steps;
  int64_t instance;  // the instance's index in the run (its emits say whose they are)
};

// One more step of the instance (a call, or a loop's next iteration, at IR site `site` of function
// `callee`): fails at the site once it has made more than max_steps.
inline void count_step(AotContext* ctx, int32_t site, int64_t callee) {
  if (ctx->max_steps > 0 && ++*ctx->steps > ctx->max_steps) ctx->host->fail(ctx, site, callee, 1);
}

// No-ops for anything but a lazy tensor (a tensor that exists, a host scalar, an object).
inline void dup_ref(AotContext* ctx, Val v) {
  if (v.node >= 0) ctx->host->dup(ctx, v);
}
inline void drop_ref(AotContext* ctx, Val v) {
  if (v.node >= 0) ctx->host->drop(ctx, v);
}

struct AotModel {
  uint32_t abi_version;
  const char* source_hash;  // of the generated C++ (it identifies model, dims and analyses)
  const char* isa;          // ACROBAT_AOT_ISA as the object was compiled: what its CPU must have
  int32_t num_blocks;
  const BlockKernel* kernels;  // by block id
  // By block id, then by step of the block's kernel plan: the adjoint of a fused loop; null for
  // other steps and for blocks without a kernel.
  const FusedAdjoint* const* adjoints;
  // Calls function `function` with its parameters args[0..]: the instance, then the values of its
  // size variables (ir::Function::size_params).
  Val (*entry)(AotContext* ctx, int32_t function, const Val* args);
};

}  // namespace acrobat::aot

// The instruction-set extensions the including translation unit is compiled for, space-separated
// (from the compiler's predefined macros; -march=native makes them the building CPU's). A compiled
// model records its own, and the runtime refuses to load it on a CPU that lacks one.
#define ACROBAT_AOT_ISA                                                  \
  "x86-64" ACROBAT_AOT_ISA_AVX ACROBAT_AOT_ISA_AVX2 ACROBAT_AOT_ISA_FMA  \
      ACROBAT_AOT_ISA_AVX512F ACROBAT_AOT_ISA_AVX512BW ACROBAT_AOT_ISA_AVX512DQ ACROBAT_AOT_ISA_AVX512VL
#ifdef __AVX__
#define ACROBAT_AOT_ISA_AVX " avx"
#else
#define ACROBAT_AOT_ISA_AVX ""
#endif
#ifdef __AVX2__
#define ACROBAT_AOT_ISA_AVX2 " avx2"
#else
#define ACROBAT_AOT_ISA_AVX2 ""
#endif
#ifdef __FMA__
#define ACROBAT_AOT_ISA_FMA " fma"
#else
#define ACROBAT_AOT_ISA_FMA ""
#endif
#ifdef __AVX512F__
#define ACROBAT_AOT_ISA_AVX512F " avx512f"
#else
#define ACROBAT_AOT_ISA_AVX512F ""
#endif
#ifdef __AVX512BW__
#define ACROBAT_AOT_ISA_AVX512BW " avx512bw"
#else
#define ACROBAT_AOT_ISA_AVX512BW ""
#endif
#ifdef __AVX512DQ__
#define ACROBAT_AOT_ISA_AVX512DQ " avx512dq"
#else
#define ACROBAT_AOT_ISA_AVX512DQ ""
#endif
#ifdef __AVX512VL__
#define ACROBAT_AOT_ISA_AVX512VL " avx512vl"
#else
#define ACROBAT_AOT_ISA_AVX512VL ""
#endif

extern "C" const acrobat::aot::AotModel* acrobat_aot_model();
