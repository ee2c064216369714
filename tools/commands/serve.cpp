// `acrobat serve`: the model behind HTTP with a dynamic batcher (tools/serve.h).
#include <cctype>
#include <filesystem>
#include <limits>
#include <optional>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli_options.h"
#include "commands/command.h"
#include "commands/common.h"
#include "engines/inputs.h"
#include "io/json_lines.h"
#include "serve.h"

namespace acrobat::cli {

namespace {

struct ServeArgs {
  std::string port = "8500", max_batch = "64", delay = "0", max_queue = "65536", deadline_ms = "0", max_request_bytes,
              max_connections, read_timeout, idle_timeout, request_timeout, drain_seconds, auth_token_file;
  bool no_pin = false;
  bool continuous = false;
  std::string max_cost = "0";
  std::string models_file;  // --models
};

// The most models one server serves (--models): each has a batcher thread and its engine's memory.
constexpr size_t kMaxServedModels = 32;

// A model of a --models file: its URL name, its run options (the command's, with the line's model,
// params, seed, sizes and entry) and its --max-cost.
struct ModelLine {
  std::string name;
  RunOptions options;
  int64_t max_cost = 0;
};

// A model's name in the URLs: 1 to 64 letters, digits, '_' or '-' (a name goes into the routes'
// patterns, so nothing a pattern reads otherwise).
bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-')) return false;
  return true;
}

// Reads a --models file: one JSON object per line, a model each,
//   {"model": "treelstm.acr", "name": "trees", "params": "w.safetensors", "set": {"H": 256}}
// with "model" (the .acr file) required and "name" (default: the model file's stem), "params",
// "seed", "set" (sizes as --set), "entry" and "max_cost" (as --max-cost) optional. Relative paths
// are read from the file's directory. Errors name the line of the model (file:line:col).
std::vector<ModelLine> read_models_file(const std::string& path, const RunOptions& base, int64_t max_cost) {
  const std::vector<io::JsonLine> lines = io::read_json_lines(path);
  if (lines.empty()) throw UserError(path + ": no model (expected one JSON object per line, {\"model\": FILE, ...})");
  if (lines.size() > kMaxServedModels)
    throw UserError(lines[kMaxServedModels].loc,
                    fmt::format("more than {} models; one server serves at most {}", kMaxServedModels, kMaxServedModels));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto relative = [&](const std::string& file) { return (dir / file).lexically_normal().string(); };
  std::vector<ModelLine> out;
  for (const io::JsonLine& line : lines) {
    auto fail = [&](const std::string& what) { throw UserError(line.loc, what); };
    const nlohmann::json& j = line.value;
    if (!j.is_object()) fail("expected a model: an object {\"model\": FILE, ...}, found " + io::json_type_name(j));
    auto text = [&](const char* key) -> std::optional<std::string> {
      auto it = j.find(key);
      if (it == j.end()) return std::nullopt;
      if (!it->is_string() || it->get<std::string>().empty())
        fail(fmt::format("\"{}\": expected a non-empty string, found {}", key, io::json_type_name(*it)));
      return it->get<std::string>();
    };
    auto count = [&](const char* key, int64_t most) -> std::optional<int64_t> {
      auto it = j.find(key);
      if (it == j.end()) return std::nullopt;
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > most)
        fail(fmt::format("\"{}\": expected an integer from 0 to {}, found {}", key, most, it->dump()));
      return it->get<int64_t>();
    };
    for (const auto& [key, value] : j.items())
      if (key != "model" && key != "name" && key != "params" && key != "seed" && key != "set" && key != "entry" &&
          key != "max_cost")
        fail("unknown key \"" + key + "\" (expected model, name, params, seed, set, entry, max_cost)");
    ModelLine m;
    m.options = base;
    const std::optional<std::string> model = text("model");
    if (!model) fail("\"model\": the model file (.acr) is missing");
    m.options.model = relative(*model);
    m.name = text("name").value_or(std::filesystem::path(*model).stem().string());
    if (!valid_model_name(m.name))
      fail("\"name\": \"" + m.name.substr(0, 80) + "\" is no model name (1 to 64 letters, digits, '_' or '-')");
    for (const ModelLine& earlier : out)
      if (earlier.name == m.name)
        fail("a second model named " + m.name + " (names must differ: give one a \"name\")");
    if (auto params = text("params")) m.options.params = relative(*params);
    if (auto seed = count("seed", std::numeric_limits<int64_t>::max())) m.options.seed = static_cast<uint64_t>(*seed);
    if (auto entry = text("entry")) m.options.entry = *entry;
    m.max_cost = count("max_cost", kMaxCount).value_or(max_cost);
    if (auto it = j.find("set"); it != j.end()) {
      if (!it->is_object()) fail("\"set\": expected an object of sizes, {\"H\": 256}, found " + io::json_type_name(*it));
      for (const auto& [size, value] : it->items()) {
        if (!value.is_number_integer())
          fail("\"set\": \"" + size + "\": expected an integer, found " + io::json_type_name(value));
        m.options.sets.push_back(size + "=" + std::to_string(value.get<int64_t>()));
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The token of --auth-token-file: the file's text without surrounding blanks, not empty.
std::string read_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("--auth-token-file: cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const auto blank = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  while (!token.empty() && blank(token.back())) token.pop_back();
  size_t begin = 0;
  while (begin < token.size() && blank(token[begin])) ++begin;
  token.erase(0, begin);
  if (token.empty()) throw UserError("--auth-token-file: " + path + " is empty (expected the token)");
  for (char ch : token)
    if (static_cast<unsigned char>(ch) < 0x21 || static_cast<unsigned char>(ch) > 0x7e)
      throw UserError("--auth-token-file: the token in " + path + " must be one word of printable ASCII");
  return token;
}

// The limits of the connections, each option left out keeping HttpLimits' default.
void read_limits(const ServeArgs& a, HttpLimits& l) {
  auto seconds = [](const char* option, const std::string& text, double& out, int64_t min) {
    if (!text.empty()) out = static_cast<double>(parse_number(option, text, min, 3600));
  };
  if (!a.max_request_bytes.empty())
    l.max_request_bytes = parse_number("--max-request-bytes", a.max_request_bytes, 1024, int64_t{1} << 32);
  if (!a.max_connections.empty()) l.max_connections = parse_number("--max-connections", a.max_connections, 1, 4096);
  seconds("--read-timeout", a.read_timeout, l.read_timeout, 1);
  seconds("--idle-timeout", a.idle_timeout, l.idle_timeout, 1);
  seconds("--request-timeout", a.request_timeout, l.request_timeout, 1);
  seconds("--drain-seconds", a.drain_seconds, l.drain_seconds, 0);
}

int serve(const RunOptions& o, ServeOptions so, const ServeArgs& a, const CLI::App& cmd) {
  so.port = static_cast<int>(parse_number("--port", a.port, 0, 65535));
  so.max_batch = parse_number("--max-batch", a.max_batch, 1, kMaxBatch);
  so.max_delay_ms = static_cast<double>(parse_number("--max-delay-ms", a.delay, 0, 60000));
  so.max_queue = parse_number("--max-queue", a.max_queue, 1, kMaxCount);
  so.deadline_ms = static_cast<int64_t>(parse_number("--deadline-ms", a.deadline_ms, 0, kMaxDeadlineMs));
  so.pin = !a.no_pin;
  so.continuous = a.continuous;
  const int64_t max_cost = parse_number("--max-cost", a.max_cost, 0, kMaxCount);
  read_limits(a, so.limits);
  if (!a.auth_token_file.empty()) so.auth_token = read_token(a.auth_token_file);
  std::vector<ModelLine> lines;
  if (a.models_file.empty()) {
    if (o.model.empty()) throw UserError("serve: expected a model file (.acr), or --models FILE");
    lines.push_back({std::filesystem::path(o.model).stem().string(), o, max_cost});
  } else {
    if (!o.model.empty()) throw UserError("serve: a model file and --models " + a.models_file + ": give one of them");
    for (const char* option : {"--params", "--seed", "--set", "--entry", "--max-cost"})
      if (cmd.count(option) > 0)
        throw UserError(fmt::format("serve: {} with --models: give it on the model's line of {}", option,
                                    a.models_file));
    lines = read_models_file(a.models_file, o, max_cost);
  }
  std::vector<ServedModel> models;
  for (const ModelLine& line : lines)
    models.push_back({line.name, line.options.model, line.options.entry, line.max_cost, [&line] {
                        Prepared p = prepare(line.options, false);
                        return LoadedModel{p.module, make_cli_engine(line.options, p), p.params};
                      }});
  const ServeCores cores = ServeCores::split(thread_count(o.threads), so.pin);
  return serve_command(so, models, cores);
}

void add_limit_options(CLI::App* cmd, ServeArgs& a) {
  const HttpLimits d;
  cmd->add_option("--max-request-bytes", a.max_request_bytes,
                  "Largest request body, 1024 to 2^32 bytes; a larger one is answered 413 (default 16 MiB)");
  cmd->add_option("--max-connections", a.max_connections,
                  fmt::format("Connections open at once, 1 to 4096; one more is answered 503 and closed (default {})",
                              d.max_connections));
  cmd->add_option("--read-timeout", a.read_timeout,
                  fmt::format("Seconds to wait for a client's next byte, or for it to take the answer's (default {})",
                              d.read_timeout));
  cmd->add_option("--idle-timeout", a.idle_timeout,
                  fmt::format("Seconds a kept-alive connection may wait for its next request (default {})", d.idle_timeout));
  cmd->add_option("--request-timeout", a.request_timeout,
                  fmt::format("Seconds for a request to arrive whole from its first byte, however slowly it drips; "
                              "then 408 and closed (default {})", d.request_timeout));
  cmd->add_option("--drain-seconds", a.drain_seconds,
                  fmt::format("On SIGINT/SIGTERM, seconds given to the requests in flight before the connections "
                              "still in one are cut (default {})", d.drain_seconds));
  cmd->add_option("--auth-token-file", a.auth_token_file,
                  "File holding a bearer token: every endpoint but /health and /ready then wants "
                  "'Authorization: Bearer TOKEN' (401 without it); use TLS in front (docs/serving.md)");
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto numbers = std::make_shared<NumberArgs>();
  auto so = std::make_shared<ServeOptions>();
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve a model over HTTP (TensorFlow Serving / KServe v1 REST: POST /v1/models/NAME:predict "
               "{\"instances\": [...]}), batching concurrent requests; /health, /ready, /metrics, "
               "/v1/models/NAME/metadata; drains on SIGINT/SIGTERM (docs/serving.md)");
  add_model_options(cmd, *o, *numbers, "Model file (.acr); NAME is its stem (or --models)");
  cmd->get_option("model")->required(false);
  cmd->add_option("--models", a->models_file,
                  "Serve several models: a file of one JSON object per line, {\"model\": FILE, \"name\": NAME, "
                  "\"params\": FILE, \"set\": {\"H\": 256}, \"seed\": N, \"entry\": F, \"max_cost\": N} (paths "
                  "from the file's directory); their batches take turns on the engine (docs/serving.md)");
  cmd->add_option("--set", o->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--entry", o->entry, "Function to serve (default main)");
  add_engine_option(cmd, o->engine, "batched (default) or aot", {"batched", "aot"});
  cmd->add_option("--threads", numbers->threads, "Threads splitting each large batched kernel (default: all cores)");
  cmd->add_option("--host", so->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", a->port, "Port (default 8500; 0: any free port, printed)");
  cmd->add_option("--max-batch", a->max_batch, "Most instances per engine run (default 64)");
  cmd->add_option("--max-queue", a->max_queue,
                  "Most instances waiting for a batch; a request whose instances would make more is answered 503 "
                  "(default 65536)");
  cmd->add_option("--deadline-ms", a->deadline_ms,
                  "A request's deadline when its body gives none (\"deadline_ms\"): past it the answer is a 504 and "
                  "its instances not yet in a batch are dropped (default 0: none)");
  cmd->add_option("--max-delay-ms", a->delay,
                  "Longest the oldest queued instance waits for a fuller batch, ms (default 0: a batch of what is "
                  "queued runs as soon as the engine is free)");
  cmd->add_flag("--continuous", a->continuous,
                "Continuous batching: queued instances join the running batch at its next step (up to "
                "--max-batch running at once) and each is answered as soon as it is done; a request past its "
                "deadline or whose client left has its instances stopped where they are (docs/serving.md)");
  cmd->add_option("--max-cost", a->max_cost,
                  "Admission by cost: the model's function cost(x) -> int (of the entry's input) gives each "
                  "instance's cost, and a batch (with --continuous: the instances running) holds at most this "
                  "much, besides --max-batch; an instance costing more runs alone (default 0: by count alone)");
  cmd->add_flag("--no-pin", a->no_pin,
                "Leave every thread on every core (default: when there are more cores than --threads, "
                "the engine keeps the first --threads cores to itself and HTTP gets the rest)");
  add_max_steps_option(cmd, *numbers, std::to_string(kServeMaxSteps));
  add_limit_options(cmd, *a);
  return {cmd, [o, numbers, so, a, cmd] {
            o->max_steps = kServeMaxSteps;  // unless --max-steps says otherwise
            numbers->read(*o);
            return serve(*o, *so, *a, *cmd);
          }};
}

}  // namespace acrobat::cli
