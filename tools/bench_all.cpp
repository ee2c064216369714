// `acrobat bench --all`: the evaluation table. For each model and size: the oracle
// (tests/reference/generate.py) writes the weights, and the synthetic data for models without a
// data set; then one `bench` run measures the reference engine, the interpreter path and the AOT
// engine at batch 8 and 64 and eager PyTorch on the same weights and instances. The results go to
// all.json and all.md, and bench/plot_all.py draws all.png.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench.h"
#include "io/files.h"
#include "compiler/pipeline.h"
#include "engines/engine.h"
#include "engines/inputs.h"
#include "runtime/params.h"

namespace acrobat {

namespace {

struct Case {
  std::string model;
  std::string size;               // as shown in the table
  std::vector<std::string> sets;  // --set K=V
  std::string kind;               // acrobat input kind
  bool synthetic;                 // data written by the oracle's make_data
  size_t count, quick_count;      // instances
  bool quick;                     // part of --quick
};

// The evaluation models (models/*.acr), both sizes where they have two.
std::vector<Case> cases() {
  return {
      {"treelstm", "H=256", {"H=256"}, "sst", false, 2210, 32, true},
      {"treelstm", "H=512", {"H=512"}, "sst", false, 2210, 32, false},
      {"mvrnn", "H=64", {"H=64"}, "sst", false, 2210, 32, true},
      {"mvrnn", "H=128", {"H=128"}, "sst", false, 2210, 32, false},
      {"birnn", "H=256", {"H=256"}, "sst-tokens", false, 2210, 32, true},
      {"birnn", "H=512", {"H=512"}, "sst-tokens", false, 2210, 32, false},
      {"nestedrnn", "H=256", {"H=256"}, "json", true, 1024, 32, true},
      {"nestedrnn", "H=512", {"H=512"}, "json", true, 1024, 32, false},
      {"drnn", "H=256", {"H=256"}, "json", true, 512, 32, true},
      {"berxit_padded", "small", {}, "json", true, 256, 16, true},
      {"berxit_padded", "base", {"D=768", "NH=12", "FF=3072", "S=128", "L=12"}, "json", true, 64, 8, false},
      {"berxit", "small", {}, "sst-tokens", false, 2210, 32, true},
      {"berxit", "base", {"D=768", "NH=12", "FF=3072", "L=12"}, "sst-tokens", false, 512, 8, false},
      {"stackrnn", "H=256", {"H=256"}, "sst-tokens", false, 2210, 32, true},
      {"stackrnn", "H=512", {"H=512"}, "sst-tokens", false, 2210, 32, false},
  };
}

}  // namespace

int bench_all_command(const BenchAllOptions& o) {
  namespace fs = std::filesystem;
  fs::create_directories(o.out_dir);
  const std::string src = o.source_dir;
  nlohmann::json all = {{"reps", o.quick ? 1 : o.reps}, {"quick", o.quick}, {"models", nlohmann::json::array()}};
  for (const Case& c : cases()) {
    if (o.quick && !c.quick) continue;
    std::string model_path = src + "/models/" + c.model + ".acr";
    bool builtin_oracle = c.model == "treelstm" || c.model == "mvrnn" || c.model == "birnn";
    if (!fs::exists(model_path) ||
        (!builtin_oracle && !fs::exists(src + "/tests/reference/model_" + c.model + ".py"))) {
      std::cerr << "bench --all: " << c.model << " has no model file or no oracle yet; skipped\n";
      continue;
    }
    size_t count = o.quick ? c.quick_count : c.count;
    std::string dir = o.out_dir + "/" + c.model + "-" + c.size;
    fs::create_directories(dir);
    std::string data = c.synthetic ? dir + "/data.jsonl" : src + "/data/sst/test.txt";
    std::string vocab = c.synthetic ? "" : src + "/data/sst/vocab.txt";
    std::string weights = dir + "/weights.safetensors";
    // The oracle's weights (and data): both sides run the same model on the same instances.
    std::string gen = "/usr/bin/python3 " + io::shell_quote(src + "/tests/reference/generate.py") +
                      " --model " + c.model + " --data " + io::shell_quote(data) + " --limit " +
                      std::to_string(c.synthetic ? count : 8) + " --params " +
                      io::shell_quote(weights) + " --expected " + io::shell_quote(dir + "/expected.json");
    if (c.synthetic) gen += " --make-data";
    if (!vocab.empty()) gen += " --vocab " + io::shell_quote(vocab);
    for (const auto& s : c.sets) gen += " --set " + s;
    std::cerr << "bench --all: " << c.model << " " << c.size << ": " << gen << "\n";
    if (std::system((gen + " > " + io::shell_quote(dir + "/generate.log") + " 2>&1").c_str()) != 0)
      throw UserError("bench --all: the oracle failed for " + c.model + " " + c.size + " (see " + dir +
                      "/generate.log)");

    auto module = compile_model(model_path, compile_options(c.sets));
    auto params = std::make_shared<ParamStore>(load_params(*module, weights, nullptr));
    const auto& f = module->functions[entry_function(*module, "main")];
    auto inputs = load_inputs(parse_input_spec(c.kind + ":" + data), f.vars[f.params[0]].type, vocab, count);

    BenchOptions b;
    b.model = "models/" + c.model + ".acr";
    b.batches = o.quick ? std::vector<size_t>{8} : std::vector<size_t>{8, 64};
    b.schedulers = {"inline-depth"};
    b.engines = {"batched", "aot"};
    b.threads = {1};
    b.sets = c.sets;
    b.reps = o.quick ? 1 : o.reps;
    b.json_path = dir + "/bench.json";
    b.pytorch_model = c.model;
    b.pytorch_script = src + "/tests/reference/bench_eager.py";
    b.data_path = data;
    b.vocab_path = vocab;
    b.pytorch_params = weights;
    b.pytorch_limit = std::min<size_t>(count, o.quick ? 8 : 300);
    bench_command(b, {BenchConfig{"as given", module}}, params, inputs);
    auto j = nlohmann::json::parse(io::read_file(b.json_path));
    j["name"] = c.model;
    j["size"] = c.size;
    all["models"].push_back(j);
  }
  io::write_file(o.out_dir + "/all.json", all.dump(2) + "\n");

  // The table: instances/s of each row and its ratio to the reference engine.
  std::ostringstream md;
  md << "# All models\n\n`acrobat bench --all" << (o.quick ? " --quick" : "") << "`: each model on "
     << "its data with the PyTorch oracle's weights; medians of " << all["reps"].get<int>()
     << " repetitions, one thread. Cells: instances/s (speed-up over the reference engine); "
     << "mean batch size for the batched engines.\n\n"
     << "| model | size | instances | reference | interpreter b8 | interpreter b64 | AOT b8 | AOT b64 "
        "| PyTorch eager |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : all["models"]) {
    const auto& rows = m["results"];
    double ref = 0;
    for (const auto& r : rows)
      if (r["engine"] == "reference") ref = r["instances_per_s"];
    auto cell = [&](const std::string& engine, int batch) -> std::string {
      for (const auto& r : rows)
        if (r["engine"] == engine && (batch == 0 || r["batch"] == batch)) {
          double ips = r["instances_per_s"];
          std::string s = fmt::format("{:.0f} ({:.2f}x)", ips, ref > 0 ? ips / ref : 0.0);
          if (engine != "reference" && engine != "pytorch")
            s += fmt::format(", batch {:.1f}", r["mean_batch_size"].get<double>());
          return s;
        }
      return "-";
    };
    md << "| " << m["name"].get<std::string>() << " | " << m["size"].get<std::string>() << " | "
       << m["instances"] << " | " << cell("reference", 0) << " | " << cell("inline-depth", 8)
       << " | " << cell("inline-depth", 64) << " | " << cell("aot", 8) << " | " << cell("aot", 64)
       << " | " << cell("pytorch", 0) << " |\n";
  }
  io::write_file(o.out_dir + "/all.md", md.str());
  std::cout << md.str();
  std::string plot = "/usr/bin/python3 " + io::shell_quote(src + "/bench/plot_all.py") + " " +
                     io::shell_quote(o.out_dir + "/all.json") + " " + io::shell_quote(o.out_dir + "/all.png");
  if (std::system(plot.c_str()) != 0) throw UserError("bench --all: the plot failed: " + plot);
  std::cout << "wrote " << o.out_dir << "/all.md, all.json, all.png\n";
  return 0;
}

}  // namespace acrobat
