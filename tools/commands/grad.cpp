// `acrobat grad`: the gradient of the summed loss of every instance, written as safetensors under
// the params' names (the file --params reads), and the loss.
#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include "commands/command.h"
#include "commands/common.h"
#include "engines/train.h"

namespace acrobat::cli {

namespace {

int grad(const RunOptions& o, const std::string& out_path) {
  Prepared p = prepare(o);
  loss_function(*p.module, o.entry);
  std::unique_ptr<Engine> engine = make_cli_engine(o, p);
  GradResult g = engine->gradients(p.inputs, o.entry);
  double total = 0;
  for (const Value& v : g.outputs) total += v.tensor->data[0];
  std::vector<const Tensor*> tensors;
  double norm = 0;
  for (size_t k = 0; k < g.grads.size(); ++k) {  // a frozen param has no gradient to write
    const Tensor& t = g.grads[k];
    if (p.module->params[k].frozen) {
      tensors.push_back(nullptr);
      continue;
    }
    for (int64_t j = 0; j < t.size(); ++j) norm += double(t.data[j]) * double(t.data[j]);
    tensors.push_back(&t);
  }
  if (!out_path.empty())
    write_param_tensors(*p.module, tensors, out_path,
                        {{"loss_sum", fmt::format("{:.9g}", total)},
                         {"instances", std::to_string(g.outputs.size())},
                         {kContentKey, kGradientsContent}});  // load_params refuses it as params
  std::cout << fmt::format("{} instances: loss sum {:.6g} (mean {:.6g}); gradient norm {:.6g} ({} engine, "
                           "{:.3f} s){}\n",
                           g.outputs.size(), total, total / double(std::max<size_t>(1, g.outputs.size())),
                           std::sqrt(norm), engine->name(), g.stats.wall_seconds,
                           out_path.empty() ? "" : "; wrote " + out_path);
  return 0;
}

}  // namespace

Command add_grad(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  o->entry = "loss";
  auto numbers = std::make_shared<NumberArgs>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "grad", "Gradient of the summed loss (the entry's output, one number per instance) with respect to "
              "every param, all instances in one batch; written as safetensors under the params' names");
  add_model_options(cmd, *o, *numbers);
  cmd->add_option("--input", o->input, "KIND:FILE, as for run (sst gives LabelledTree to a loss on them)");
  cmd->add_option("--vocab", o->vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  cmd->add_option("--set", o->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--limit", numbers->limit, "Use only the first N instances (N >= 1)");
  cmd->add_option("--entry", o->entry, "The loss function (default loss)");
  cmd->add_option("--out", *out, "Write the gradients to this safetensors file");
  add_engine_option(cmd, o->engine, "batched (default), aot or reference");
  cmd->add_option("--threads", numbers->threads, "Threads of the forward run, 1 to 1024 (default: all cores)");
  return {cmd, [o, numbers, out] {
            numbers->read(*o);
            return grad(*o, *out);
          }};
}

}  // namespace acrobat::cli
