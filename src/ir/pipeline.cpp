#include "ir/pipeline.h"

#include "ir/lower.h"
#include "lang/frontend.h"

namespace acrobat {

const std::vector<std::string>& pipeline_stages() {
  static const std::vector<std::string> stages = {"parse", "lower"};
  return stages;
}

std::shared_ptr<const ir::Module> compile_model(const std::string& path,
                                                const CompileOptions& options) {
  auto dump_after = [&](const std::string& stage, auto&& print) {
    if (options.dump && options.print_after == stage) *options.dump << print();
  };

  // 1. Parse the prelude and the model, resolve names, check types and shapes.
  std::shared_ptr<const ast::Module> ast = parse_model_file(path, options.dims);
  dump_after("parse", [&] { return ast::print_ast(*ast); });

  // 2. Lower to A-normal form; lift lambdas; expand split; keep reachable functions.
  auto ir = std::make_shared<ir::Module>(lower_to_ir(ast));
  dump_after("lower", [&] { return ir::print_module(*ir); });

  return ir;
}

}  // namespace acrobat
