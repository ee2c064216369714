// Runs the Tree-LSTM (H = 128) that the build compiled ahead of time (acrobat_add_model in
// CMakeLists.txt) on SST test trees, checks it against the interpreter path on the same batches, and
// prints the predicted classes and throughput of both.
//
//   build/examples/treelstm_aot/treelstm_aot [--limit N] [--threads N]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "compiler/pipeline.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "engines/inputs.h"

int main(int argc, char** argv) {
  using namespace acrobat;
  size_t limit = 0;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--limit") == 0) limit = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  try {
    // The module must be compiled with the dims the object was built for (SET H=128).
    CompileOptions options;
    options.dims["H"] = 128;
    auto module = compile_model(MODEL_SOURCE, options);
    auto params = std::make_shared<ParamStore>(init_params(*module, 0));
    const auto& main_fn = module->functions[entry_function(*module, "main")];
    auto inputs = load_inputs(parse_input_spec(std::string("sst:") + SST_DIR + "/test.txt"),
                              main_fn.vars[main_fn.params[0]].type, std::string(SST_DIR) + "/vocab.txt",
                              limit);

    AotOptions aot_options;
    aot_options.object = MODEL_OBJECT;  // built by the build, not at run time
    aot_options.threads = threads;
    AotEngine aot(module, params, aot_options);
    BatchedEngine interpreter(module, params);
    RunResult compiled = aot.run_batches(inputs, 64);
    RunResult interpreted = interpreter.run_batches(inputs, 64);

    double max_difference = 0;
    int agree = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& a = *compiled.outputs[i].tensor;
      const Tensor& b = *interpreted.outputs[i].tensor;
      int64_t best_a = 0, best_b = 0;
      for (int64_t j = 0; j < a.size(); ++j) {
        max_difference = std::max(max_difference, double(std::fabs(a.data[j] - b.data[j])));
        if (a.data[j] > a.data[best_a]) best_a = j;
        if (b.data[j] > b.data[best_b]) best_b = j;
      }
      agree += best_a == best_b;
      if (i < 5) std::printf("tree %zu: class %lld\n", i, static_cast<long long>(best_a));
    }
    std::printf("%zu trees: compiled %.0f trees/s, interpreted %.0f trees/s; %d of %zu predictions "
                "agree, largest output difference %.2e\n",
                inputs.size(), compiled.stats.instances_per_second(),
                interpreted.stats.instances_per_second(), agree, inputs.size(), max_difference);
    return max_difference < 1e-5 && agree == static_cast<int>(inputs.size()) ? 0 : 1;
  } catch (const UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
