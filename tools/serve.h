// `acrobat serve`: a model (or several) behind HTTP, speaking TensorFlow Serving's and KServe v1's REST
// convention (POST /v1/models/NAME:predict with {"instances": [...]}, answered by
// {"predictions": [...]}), with a dynamic batcher (serve_batcher.h): the instances of concurrent
// requests are collected into batches and each batch is one run of the engine. GET /health
// (liveness), /ready (the model loaded, not stopping), /v1/models/NAME/metadata, /metrics
// (Prometheus text, serve_metrics.h); on SIGINT or SIGTERM a drain that answers the requests in
// flight and cuts the slow ones after a deadline. docs/serving.md says what a client may expect.
// Several models (`--models FILE`) are served side by side, each at its own NAME with a batcher of
// its own; their batches take turns on the engine's cores (serve_batcher.h, EngineTurns).
//
// Limits: connections bounded in number and time (serve_http.h); a request body over
// max_request_bytes is answered 413 (whatever its content type) before it is read whole, a bad
// Content-Length 400; nesting is bounded as in the input files (io/files.h); the port is the
// server's alone; an unknown path is a 404 and a known one with another method a 405; with a
// token, every endpoint but /health and /ready answers 401 without it. Every response has a JSON
// body, names the model and never a path of the machine, and is counted by status.
//
// Isolation: a request that cannot be read (not JSON, no "instances", an instance of the wrong
// type) is answered 400 with the parse error and never joins a batch; when a batch fails at run
// time (an index out of range in one instance), its instances are run again one by one, so that
// only the requests holding a failing instance get a 400 and every other gets its outputs. The
// instances of a client that went away before its batch ran are dropped unrun (answered 499).
#pragma once

#include <sched.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "engines/engine.h"
#include "serve_http.h"

namespace acrobat {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8500;               // 0: any free port (printed)
  size_t max_batch = 64;         // instances per engine run
  size_t max_queue = 65536;      // instances waiting for a batch, at most (Batcher::submit)
  int64_t deadline_ms = 0;       // a request's deadline when it gives none (PredictRequest); 0: none
  double max_delay_ms = 0;       // the longest the oldest queued instance waits for a fuller batch
  bool continuous = false;       // instances join the running batch (Engine::run_open), max_batch at once
  HttpLimits limits;             // connections, timeouts, request size, drain
  std::string auth_token;        // when not empty, every endpoint but /health and /ready wants it
  bool pin = true;               // the engine's threads on cores of their own (ServeCores)
};

// The engine's cores and the HTTP threads' cores. When the process may run on more cores than the
// engine has threads, the engine (the batcher's thread and the engine's pool) takes the first
// `engine_threads` of them and everything else (the HTTP threads) the rest, so that parsing and
// answering requests never preempts a batch or evicts its caches. Otherwise both sets are every
// allowed core and nothing is pinned. A thread's cores are inherited by the threads it starts:
// call enter_engine() before the engine is made, enter_http() before the server starts.
class ServeCores {
 public:
  static ServeCores split(int engine_threads, bool pin);
  std::string describe() const;  // "engine on core(s) 0, HTTP on 1" or "not pinned"
  void enter_engine() const { enter(engine_); }
  void enter_http() const { enter(http_); }

 private:
  void enter(const cpu_set_t& set) const;
  cpu_set_t engine_{}, http_{};
  bool pinned_ = false;
};

// The model to serve and its engine, as `load` makes them.
struct LoadedModel {
  std::shared_ptr<const ir::Module> module;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const ParamStore> params;
};
using ModelLoader = std::function<LoadedModel()>;

// A model the server serves, at POST /v1/models/NAME:predict.
struct ServedModel {
  std::string name;        // NAME in the URL (by default the model file's stem)
  std::string model_path;  // as given; answers name the model by its file name instead
  std::string entry = "main";
  int64_t max_cost = 0;    // with the model's cost(x) -> int: the most cost a batch holds (0: none)
  ModelLoader load;
};

// Binds the port, then loads the models in turn (`load`, on the engine's cores of `cores`) while
// /health answers and /ready says 503, then serves until SIGINT or SIGTERM; returns the exit
// status. An error of a `load` closes the port and is thrown. The names must differ.
int serve_command(const ServeOptions& options, const std::vector<ServedModel>& models, const ServeCores& cores);

}  // namespace acrobat
