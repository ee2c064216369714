#include "compiler/pipeline.h"

#include <functional>

#include "analysis/explain.h"
#include "ir/lower.h"
#include "analysis/verify_plan.h"
#include "ir/verify.h"
#include "ir/walk.h"
#include "lang/ast.h"
#include "lang/frontend.h"
#include "support/big_stack.h"

namespace acrobat {

const std::vector<std::string>& pipeline_stages() {
  static const std::vector<std::string> stages = {"ast",        "ir",     "specialise", "reuse",
                                                  "concurrent", "blocks", "depth", "ownership"};
  return stages;
}

namespace {
void dump_after(const CompileOptions& options, const std::string& stage,
                const std::function<std::string()>& print) {
  if (options.dump && options.print_after == stage) *options.dump << print();
}

// Every stage after parsing ends here: the IR must still keep its invariants (ir/verify.h; one
// linear pass, so always on), then the stage is printed if asked (as `printed`: lowering's is `ir`).
void stage_done(const ir::Module& ir, const CompileOptions& options, const std::string& stage,
                const std::function<std::string()>& print, const std::string& printed = "") {
  ir::verify_module(ir, stage);
  dump_after(options, printed.empty() ? stage : printed, print);
}
}  // namespace

namespace {
std::shared_ptr<const ir::Module> compile_here(std::shared_ptr<const ast::Module> ast,
                                              const CompileOptions& options) {
  const analysis::AnalysisOptions& a = options.analysis;
  auto plan = std::make_shared<analysis::Plan>();
  plan->options = a;

  // Each pass takes the module and returns the next one with what it found; the verifier checks
  // every module a pass returns.
  // 2. Lower to A-normal form; lift lambdas; expand split; keep reachable functions.
  ir::Module m = lower_to_ir(std::move(ast));
  auto print_ir = [&] { return ir::print_module(m); };
  stage_done(m, options, "lower", print_ir, "ir");

  // 3. Calls of foldl, map, ... with a known function become direct calls of specialised copies.
  if (a.specialise) {
    Specialised s = specialise_higher_order(std::move(m));
    m = std::move(s.module);
    plan->specialisations = std::move(s.records);
  }
  stage_done(m, options, "specialise", print_ir);

  // 4. Parameter-reuse taint analysis; clones per calling context.
  if (a.reuse) {
    analysis::ReuseOptions ro;
    ro.clone = a.clone;
    analysis::Reused r = analysis::analyse_param_reuse(std::move(m), ro);
    m = std::move(r.module);
    plan->reuse = std::move(r.info);
  }
  stage_done(m, options, "reuse", print_ir);

  // 5. Independent calls that may wait for tensors made adjacent, to run concurrently.
  if (a.concurrent) {
    analysis::Grouped g = analysis::group_concurrent_calls(std::move(m));
    m = std::move(g.module);
    plan->concurrency = std::move(g.plan);
  }
  stage_done(m, options, "concurrent", print_ir);

  // The analyses from here on only read the IR; the plan refers to the nodes of this module.
  auto ir = std::make_shared<ir::Module>(std::move(m));

  // 6. Static blocks with their argument modes and kernel plans.
  plan->blocks = analysis::form_static_blocks(*ir, a.reuse ? &plan->reuse : nullptr);
  plan->block_at_site.assign(static_cast<size_t>(ir->num_sites), -1);
  for (const auto& s : plan->blocks) {
    plan->block_at_site[s.block->bindings[s.begin].rhs->site] = s.id;
    plan->kernels.push_back(s.ragged() ? analysis::KernelPlan{} : analysis::plan_kernel(s));
    plan->ragged.push_back(analysis::plan_ragged(s));
  }

  // 7. Ghost operations and phases.
  plan->depth = analysis::analyse_depth(*ir, plan->blocks, analysis::DepthOptions{a.ghosts, a.phases});
  plan->tail_call = analysis::find_tail_calls(*ir, plan->depth, plan->concurrency);
  // 8. Ownership of lazy tensors: where the host program dups and drops references.
  if (a.release)
    plan->ownership =
        analysis::analyse_ownership(*ir, plan->blocks, plan->block_at_site, plan->concurrency);
  for (const auto& f : ir->functions)
    ir::for_each_block(f.body, [&](const ir::Block& b) {
      for (const auto& bind : b.bindings)
        if (bind.rhs->kind == ir::RhsKind::Op && op_info(bind.rhs->op).op_class == OpClass::HostRead)
          plan->tensor_reads = true;
    });
  if (ir->source) plan->size_names = ir->source->size_names;
  ir->plan = plan;
  // Blocks and depth only read the IR: one check after both covers them, and the plan they made
  // with it (every node the plan keys a decision by must be one of the module's). `blocks` prints
  // the whole plan (it needs the depths), `depth` the depth plan alone.
  analysis::verify_plan(*ir, "depth");
  dump_after(options, "blocks", [&] { return analysis::explain(*ir); });
  dump_after(options, "depth", [&] { return analysis::depth_plan_str(*ir, plan->depth); });
  dump_after(options, "ownership", [&] { return analysis::ownership_str(*ir); });
  return ir;
}
}  // namespace

std::shared_ptr<const ir::Module> compile_checked(std::shared_ptr<const ast::Module> ast,
                                                 const CompileOptions& options) {
  // Lowering, the passes and the verifier recurse once per nested block, and the language allows
  // 5000 levels (docs/language.md): they run on a thread with a large stack, as the interpreters
  // do, so that neither the caller's stack size nor a build's frame sizes (a sanitizer's are
  // several times larger) decide whether a model compiles.
  std::shared_ptr<const ir::Module> out;
  StackThread(kInterpreterStackBytes).run([&] { out = compile_here(std::move(ast), options); });
  return out;
}

std::shared_ptr<const ir::Module> compile_model(const std::string& path,
                                                const CompileOptions& options) {
  // 1. Parse the prelude and the model, resolve names, check types and shapes.
  std::shared_ptr<const ast::Module> ast = parse_model_file(path, options.dims);
  dump_after(options, "ast", [&] { return ast::print_ast(*ast); });
  return compile_checked(std::move(ast), options);
}

}  // namespace acrobat
