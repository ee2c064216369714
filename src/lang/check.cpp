// The type checker's entry point: check_module runs the Checker's passes in order (see check.h for
// the algorithm and checker.h for where each pass lives).
#include "lang/check.h"

#include "lang/checker.h"

namespace acrobat {

namespace checker {

void Checker::run() {
  SizeNamesScope names(size_names_);  // errors name size variables as the model does
  declare_dims();
  declare_types();
  declare_params();
  check_param_memory();
  declare_funcs();
  for (auto& f : m_.funcs) check_func(*f);
  check_recursion();
  m_.size_names = size_names_;
  m_.size_sums = sum_of_;
  for (const auto& [local, dim] : local_sizes_) m_.run_time_sizes.emplace(dim, local);
}

}  // namespace checker

void check_module(ast::Module& module, const DimOverrides& overrides, DiagnosticSink& sink) {
  checker::Checker(module, overrides, sink).run();
  sink.throw_if_errors();
}

}  // namespace acrobat
