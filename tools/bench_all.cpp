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

// The measurements of every case, as all.json holds them.
nlohmann::json measure_all(const BenchAllOptions& o) {
  namespace fs = std::filesystem;
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
  return all;
}

// The table of `all` (all.json's document): instances/s of each row and its ratio to the reference
// engine. It is also a regression guard: a batched engine's row slower than the reference engine
// (one instance at a time) is flagged in its cell and listed after the table, and so is an AOT row
// slower than the interpreter's at its batch size; `flagged` counts them.
std::string table(const nlohmann::json& all, bool quick, size_t& flagged) {
  std::ostringstream md;
  md << "# All models\n\n`acrobat bench --all" << (quick ? " --quick" : "") << "`: each model on "
     << "its data with the PyTorch oracle's weights; medians of " << all.at("reps").get<int>()
     << " repetitions, one thread. Cells: instances/s (speed-up over the reference engine); "
     << "mean batch size for the batched engines. A batched row below the reference engine is in bold "
     << "and listed after the table, as is an AOT row below the interpreter's.\n\n"
     << "| model | size | instances | reference | interpreter b8 | interpreter b64 | AOT b8 | AOT b64 "
        "| PyTorch eager |\n|---|---|---|---|---|---|---|---|---|\n";
  std::vector<std::string> below, aot_below;
  for (const auto& m : all.at("models")) {
    const auto& rows = m.at("results");
    const std::string name = m.at("name").get<std::string>(), size = m.at("size").get<std::string>();
    // The row of `engine` (at `batch`, unless 0), or null.
    auto find = [&](const std::string& engine, int batch) -> const nlohmann::json* {
      for (const auto& r : rows)
        if (r.at("engine") == engine && (batch == 0 || r.at("batch") == batch)) return &r;
      return nullptr;
    };
    auto rate = [](const nlohmann::json* r) { return r ? r->at("instances_per_s").get<double>() : 0.0; };
    const double ref = rate(find("reference", 0));
    auto cell = [&](const std::string& engine, int batch, const char* label) -> std::string {
      const nlohmann::json* r = find(engine, batch);
      if (!r) return "-";
      const double ips = rate(r), ratio = ref > 0 ? ips / ref : 0.0;
      if (!label) return fmt::format("{:.0f} ({:.2f}x)", ips, ratio);
      const bool slower = ref > 0 && ratio < 1.0;
      if (slower) below.push_back(fmt::format("{} {} {} {:.2f}x", name, size, label, ratio));
      const char* bold = slower ? "**" : "";
      return fmt::format("{:.0f} ({}{:.2f}x{}), batch {:.1f}", ips, bold, ratio, bold,
                         r->at("mean_batch_size").get<double>());
    };
    md << "| " << name << " | " << size << " | " << m.at("instances") << " | " << cell("reference", 0, nullptr)
       << " | " << cell("inline-depth", 8, "interpreter b8") << " | " << cell("inline-depth", 64, "interpreter b64")
       << " | " << cell("aot", 8, "AOT b8") << " | " << cell("aot", 64, "AOT b64") << " | "
       << cell("pytorch", 0, nullptr) << " |\n";
    for (int batch : {8, 64}) {
      const double aot = rate(find("aot", batch)), interpreter = rate(find("inline-depth", batch));
      if (aot > 0 && interpreter > 0 && aot < interpreter)
        aot_below.push_back(fmt::format("{} {} b{} {:.2f}x", name, size, batch, aot / interpreter));
    }
  }
  if (below.empty())
    md << "\nEvery batched row is at or above the reference engine.\n";
  else
    md << "\n**Below the reference engine** (slower batched than one instance at a time): "
       << fmt::format("{}", fmt::join(below, "; ")) << ".\n";
  if (aot_below.empty())
    md << "\nThe AOT engine is at or above the interpreter on every row.\n";
  else
    md << "\n**The AOT engine below the interpreter** (its rate over the interpreter's at the batch size): "
       << fmt::format("{}", fmt::join(aot_below, "; ")) << ".\n";
  flagged = below.size() + aot_below.size();
  return md.str();
}

}  // namespace

int bench_all_command(const BenchAllOptions& o) {
  namespace fs = std::filesystem;
  fs::create_directories(o.out_dir);
  std::string json_path = o.out_dir + "/all.json";
  nlohmann::json all;
  if (o.table_from.empty()) {
    all = measure_all(o);
  } else {
    json_path = o.table_from;
    try {
      all = nlohmann::json::parse(io::read_file(o.table_from));
    } catch (const nlohmann::json::exception& e) {
      throw UserError(o.table_from + ": not JSON (" + e.what() + ")");
    }
  }
  size_t flagged = 0;
  std::string md;
  try {
    md = table(all, all.value("quick", false), flagged);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(json_path + ": not the JSON of `acrobat bench --all` (" + e.what() + ")");
  }
  if (o.table_from.empty()) io::write_file(json_path, all.dump(2) + "\n");  // the measurements only
  io::write_file(o.out_dir + "/all.md", md);
  std::cout << md;
  if (flagged > 0)
    std::cerr << "bench --all: " << flagged << " row(s) flagged: below the reference engine, or the AOT engine below "
              << "the interpreter (all.md lists them)\n";
  std::string plot = "/usr/bin/python3 " + io::shell_quote(o.source_dir + "/bench/plot_all.py") + " " +
                     io::shell_quote(json_path) + " " + io::shell_quote(o.out_dir + "/all.png");
  if (std::system(plot.c_str()) != 0) throw UserError("bench --all: the plot failed: " + plot);
  std::cout << "wrote " << o.out_dir << "/all.md, " << (o.table_from.empty() ? "all.json, " : "") << "all.png\n";
  return 0;
}

}  // namespace acrobat
