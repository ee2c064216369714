// `acrobat serve`: the model behind HTTP with a dynamic batcher (tools/serve.h).
#include <filesystem>

#include "cli_options.h"
#include "commands/command.h"
#include "commands/common.h"
#include "serve.h"

namespace acrobat::cli {

namespace {

struct ServeArgs {
  std::string port = "8500", max_batch = "64", delay = "0", http_threads, max_request_bytes;
  bool no_pin = false;
};

int serve(const RunOptions& o, ServeOptions so, const ServeArgs& a) {
  so.port = static_cast<int>(parse_number("--port", a.port, 0, 65535));
  so.max_batch = parse_number("--max-batch", a.max_batch, 1, kMaxBatch);
  so.max_delay_ms = static_cast<double>(parse_number("--max-delay-ms", a.delay, 0, 60000));
  so.pin = !a.no_pin;
  if (!a.max_request_bytes.empty())
    so.max_request_bytes = parse_number("--max-request-bytes", a.max_request_bytes, 1024, int64_t{1} << 32);
  if (!a.http_threads.empty())
    so.http_threads = static_cast<int>(parse_number("--http-threads", a.http_threads, 1, 4096));
  Prepared p = prepare(o, false);
  so.entry = o.entry;
  so.name = std::filesystem::path(o.model).stem().string();
  const ServeCores cores = ServeCores::split(thread_count(o.threads), so.pin);
  cores.enter_engine();  // the engine's pool starts on the engine's cores
  std::unique_ptr<Engine> engine = make_cli_engine(o, p);
  return serve_command(so, *p.module, *engine, cores);
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto numbers = std::make_shared<NumberArgs>();
  auto so = std::make_shared<ServeOptions>();
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve a model over HTTP (TensorFlow Serving / KServe v1 REST: POST /v1/models/NAME:predict "
               "{\"instances\": [...]}), batching concurrent requests; /health, /metrics; stops on SIGINT/SIGTERM");
  add_model_options(cmd, *o, *numbers, "Model file (.acr); NAME is its stem");
  cmd->add_option("--set", o->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--entry", o->entry, "Function to serve (default main)");
  add_engine_option(cmd, o->engine, "batched (default) or aot", {"batched", "aot"});
  cmd->add_option("--threads", numbers->threads, "Threads splitting each large batched kernel (default: all cores)");
  cmd->add_option("--host", so->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", a->port, "Port (default 8500; 0: any free port, printed)");
  cmd->add_option("--max-batch", a->max_batch, "Most instances per engine run (default 64)");
  cmd->add_option("--max-delay-ms", a->delay,
                  "Longest the oldest queued instance waits for a fuller batch, ms (default 0: a batch of what is "
                  "queued runs as soon as the engine is free)");
  cmd->add_flag("--no-pin", a->no_pin,
                "Leave every thread on every core (default: when there are more cores than --threads, "
                "the engine keeps the first --threads cores to itself and HTTP gets the rest)");
  cmd->add_option("--http-threads", a->http_threads, "Connections served at once (default: 2 * max-batch + 8)");
  cmd->add_option("--max-request-bytes", a->max_request_bytes,
                  "Largest request body, 1024 to 2^32 bytes; a larger one is answered 413 (default 16 MiB)");
  return {cmd, [o, numbers, so, a] {
            numbers->read(*o);
            return serve(*o, *so, *a);
          }};
}

}  // namespace acrobat::cli
