#include "serve.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engines/inputs.h"
#include "io/files.h"
#include "support/diagnostics.h"
#include "support/clock.h"

namespace acrobat {
namespace {



// A Prometheus histogram with fixed upper bounds (cumulative counts are formed when printed).
class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<double> bounds)
      : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double x) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin()];
    sum_ += x;
    ++count_;
  }
  void print(std::string& out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name_, help_, name_);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += counts_[i];
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name_, bounds_[i], cumulative);
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name_, count_, name_, sum_, name_, count_);
  }

 private:
  std::string name_, help_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
  mutable std::mutex mutex_;
};

std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

struct Metrics {
  std::mutex mutex;
  std::map<int, uint64_t> requests;   // predict requests, by HTTP status
  std::map<int, uint64_t> responses;  // every response of every endpoint, by HTTP status
  uint64_t instances = 0, batches = 0, batch_failures = 0, internal_errors = 0;
  Histogram batch_size{"acrobat_batch_size", "Instances per engine run.",
                       {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}};
  Histogram queue_seconds{"acrobat_queue_seconds", "Time an instance waited for its batch to start.", latency_bounds()};
  Histogram run_seconds{"acrobat_run_seconds", "Time of one engine run (a batch).", latency_bounds()};
  Histogram request_seconds{"acrobat_request_seconds", "Time from a predict request's arrival to its answer.",
                            latency_bounds()};

  void answered(int status) {
    std::lock_guard<std::mutex> lock(mutex);
    ++requests[status];
  }
  void responded(int status) {
    std::lock_guard<std::mutex> lock(mutex);
    ++responses[status];
  }
  std::string text() {
    std::string out;
    {
      std::lock_guard<std::mutex> lock(mutex);
      out += "# HELP acrobat_requests_total Predict requests answered, by HTTP status.\n"
             "# TYPE acrobat_requests_total counter\n";
      for (auto [code, n] : requests) out += fmt::format("acrobat_requests_total{{code=\"{}\"}} {}\n", code, n);
      out += "# HELP acrobat_responses_total Responses of every endpoint, by HTTP status.\n"
             "# TYPE acrobat_responses_total counter\n";
      for (auto [code, n] : responses) out += fmt::format("acrobat_responses_total{{code=\"{}\"}} {}\n", code, n);
      out += fmt::format("# HELP acrobat_instances_total Instances run.\n# TYPE acrobat_instances_total counter\n"
                         "acrobat_instances_total {}\n", instances);
      out += fmt::format("# HELP acrobat_batches_total Engine runs.\n# TYPE acrobat_batches_total counter\n"
                         "acrobat_batches_total {}\n", batches);
      out += fmt::format("# HELP acrobat_batch_failures_total Batches that failed at run time and were run "
                         "again instance by instance.\n# TYPE acrobat_batch_failures_total counter\n"
                         "acrobat_batch_failures_total {}\n", batch_failures);
      out += fmt::format("# HELP acrobat_internal_errors_total Batches that met an internal error (a bug in "
                         "acrobat); their requests were answered 500.\n# TYPE acrobat_internal_errors_total "
                         "counter\nacrobat_internal_errors_total {}\n", internal_errors);
    }
    batch_size.print(out);
    queue_seconds.print(out);
    run_seconds.print(out);
    request_seconds.print(out);
    return out;
  }
};

// One instance of a request, waiting for its batch.
struct Pending {
  Value input;
  size_t index;  // in its request's "instances"
  Clock::time_point queued;
  std::promise<std::pair<bool, Value>> done;  // (ok, output); not ok: error text in `error`
  std::string error;
  bool internal = false;  // the error is acrobat's (InternalError): a 500, not the request's 400
};

// The dynamic batcher: one thread takes up to max_batch queued instances once there are that
// many or the oldest has waited max_delay, and runs them as one batch on the engine.
class Batcher {
 public:
  Batcher(const ServeOptions& o, Engine& engine, Metrics& metrics, const ServeCores& cores)
      : o_(o), engine_(engine), metrics_(metrics), cores_(cores), thread_([this] { loop(); }) {}
  ~Batcher() { stop(); }

  void submit(std::vector<std::shared_ptr<Pending>>& items) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& p : items) queue_.push_back(p);
    }
    wake_.notify_one();
  }
  // Runs what is queued, then ends the thread.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    cores_.enter_engine();
    const auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(o_.max_delay_ms));
    std::vector<std::shared_ptr<Pending>> batch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping, nothing left
        wake_.wait_until(lock, queue_.front()->queued + delay,
                         [&] { return queue_.size() >= o_.max_batch || stopping_; });
        const size_t n = std::min(o_.max_batch, queue_.size());
        batch.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      }
      const auto start = Clock::now();
      for (const auto& p : batch)
        metrics_.queue_seconds.observe(std::chrono::duration<double>(start - p->queued).count());
      run(batch, true);
      metrics_.run_seconds.observe(seconds_since(start));
      metrics_.batch_size.observe(static_cast<double>(batch.size()));
    }
  }

  // One engine run of `batch`; when it fails and `split`, each instance again on its own.
  void run(const std::vector<std::shared_ptr<Pending>>& batch, bool split) {
    std::vector<Value> inputs;
    inputs.reserve(batch.size());
    for (const auto& p : batch) inputs.push_back(p->input);
    try {
      RunResult r = engine_.run(inputs, o_.entry, batch.size() == 1 ? batch[0]->index : 0);
      {
        std::lock_guard<std::mutex> lock(metrics_.mutex);
        ++metrics_.batches;
        metrics_.instances += batch.size();
      }
      for (size_t i = 0; i < batch.size(); ++i) batch[i]->done.set_value({true, std::move(r.outputs[i])});
    } catch (const InternalError& e) {
      // A bug, not an instance's fault: retrying the instances one by one would only meet it again.
      // The batch's requests get a 500; the engine's next run starts afresh.
      {
        std::lock_guard<std::mutex> lock(metrics_.mutex);
        ++metrics_.internal_errors;
      }
      for (const auto& p : batch) {
        p->error = e.what();
        p->internal = true;
        p->done.set_value({false, Value{}});
      }
    } catch (const std::exception& e) {
      if (split && batch.size() > 1) {
        {
          std::lock_guard<std::mutex> lock(metrics_.mutex);
          ++metrics_.batch_failures;
        }
        for (const auto& p : batch) run({p}, false);
        return;
      }
      for (const auto& p : batch) {
        p->error = e.what();
        p->done.set_value({false, Value{}});
      }
    }
  }

  const ServeOptions& o_;
  Engine& engine_;
  Metrics& metrics_;
  const ServeCores& cores_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Pending>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

void reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Invalid UTF-8 (a request's own bytes quoted in an error) is replaced, never a failed answer.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// SIGINT and SIGTERM: the handler (on whichever thread the signal lands, libraries' threads
// included) writes the signal's number to a pipe that one thread of the server reads.
int stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(stop_pipe[1], &b, 1);
}

std::string core_list(const cpu_set_t& set) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out += fmt::format("{}{}", out.empty() ? "" : ",", c);
  return out;
}

}  // namespace

ServeCores ServeCores::split(int engine_threads, bool pin) {
  ServeCores s;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return s;
  s.engine_ = s.http_ = allowed;
  if (!pin || CPU_COUNT(&allowed) <= engine_threads) return s;
  CPU_ZERO(&s.engine_);
  CPU_ZERO(&s.http_);
  int taken = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (taken++ < engine_threads)
      CPU_SET(c, &s.engine_);
    else
      CPU_SET(c, &s.http_);
  }
  s.pinned_ = true;
  return s;
}

std::string ServeCores::describe() const {
  if (!pinned_) return "not pinned";
  return "engine on core(s) " + core_list(engine_) + ", HTTP on " + core_list(http_);
}

void ServeCores::enter(const cpu_set_t& set) const {
  if (pinned_) sched_setaffinity(0, sizeof set, &set);  // 0: the calling thread; a failure leaves it unpinned
}

namespace {

// POST /v1/models/NAME:predict: reads the body (bounded), parses its instances, queues them on the
// batcher and answers with their outputs, or with the first error among them.
class PredictEndpoint {
 public:
  PredictEndpoint(const ServeOptions& o, const Type& in_type, const Type& out_type, Batcher& batcher, Metrics& metrics)
      : o_(o), in_type_(in_type), out_type_(out_type), batcher_(batcher), metrics_(metrics) {}

  void operator()(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    const auto arrived = Clock::now();
    auto answer = [&](int status, const nlohmann::json& body) {
      reply(res, status, body);
      metrics_.answered(status);
      metrics_.request_seconds.observe(seconds_since(arrived));
    };
    std::string text;
    if (!read_body(req, res, read, text, answer)) return;
    std::vector<std::shared_ptr<Pending>> items;
    try {
      items = instances(text);
    } catch (const nlohmann::json::exception& e) {
      answer(400, {{"error", std::string("the request body is not JSON: ") + e.what()}});
      return;
    } catch (const UserError& e) {
      answer(400, {{"error", e.what()}});
      return;
    } catch (const InternalError& e) {
      answer(500, {{"error", e.what()}});
      return;
    }
    const auto queued = Clock::now();
    for (auto& p : items) p->queued = queued;
    std::vector<std::future<std::pair<bool, Value>>> futures;
    for (auto& p : items) futures.push_back(p->done.get_future());
    batcher_.submit(items);
    nlohmann::json predictions = nlohmann::json::array();
    std::string error;
    bool internal = false;
    for (size_t i = 0; i < items.size(); ++i) {
      auto [ok, out] = futures[i].get();
      if (!ok && error.empty()) {
        error = items[i]->error;
        internal = items[i]->internal;
      }
      if (ok) predictions.push_back(value_to_json(out, out_type_));
    }
    if (!error.empty())
      answer(internal ? 500 : 400, {{"error", error}});
    else
      answer(200, {{"predictions", std::move(predictions)}});
  }

 private:
  // The body into `text`, read here rather than by the library so that the bound holds whatever
  // the content type (the library caps a form-encoded body, `curl -d`'s default, at 8 KiB); false
  // once `answer` has answered why it could not be.
  template <class Answer>
  bool read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read,
                 std::string& text, Answer&& answer) const {
    if (req.is_multipart_form_data()) {
      answer(415, {{"error", "the request body must be JSON {\"instances\": [...]}, not a multipart form"}});
      return false;
    }
    bool too_large = false;
    const bool whole = read([&](const char* data, size_t n) {
      if (text.size() + n > o_.max_request_bytes) {
        too_large = true;
        return false;
      }
      text.append(data, n);
      return true;
    });
    too_large = too_large || res.status == 413;  // the library's own check of Content-Length
    if (too_large)
      answer(413, {{"error", fmt::format("the request body is larger than {} bytes (--max-request-bytes)",
                                         o_.max_request_bytes)}});
    else if (!whole)
      answer(400, {{"error", "the request body could not be read whole"}});
    return whole && !too_large;
  }

  // The request's instances, parsed as the files' readers parse a line: nesting bounded
  // (io::kMaxJsonDepth), no key twice.
  std::vector<std::shared_ptr<Pending>> instances(const std::string& text) const {
    nlohmann::json body;
    if (auto e = io::parse_json_strict(text, body, [](size_t at) { return "byte " + std::to_string(at); }))
      throw UserError("the request body is not JSON: " + e->message + " at byte " + std::to_string(e->offset));
    if (!body.is_object() || !body.contains("instances") || !body["instances"].is_array())
      throw UserError("the request body must be a JSON object {\"instances\": [...]}");
    const auto& instances = body["instances"];
    if (instances.empty()) throw UserError("\"instances\" is empty");
    std::vector<std::shared_ptr<Pending>> items;
    for (size_t i = 0; i < instances.size(); ++i) {
      auto p = std::make_shared<Pending>();
      p->input = value_from_json(instances[i], in_type_, SourceLoc{"instances[" + std::to_string(i) + "]", 0, 0});
      p->index = i;
      items.push_back(std::move(p));
    }
    return items;
  }

  const ServeOptions& o_;
  const Type& in_type_;
  const Type& out_type_;
  Batcher& batcher_;
  Metrics& metrics_;
};

// SIGINT and SIGTERM write to the stop pipe (on_stop_signal).
void catch_stop_signals() {
  if (pipe(stop_pipe) != 0) throw UserError("serve: cannot make a pipe for its signals");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// Errors the library answers itself (an unknown path, a body over the limit) get a JSON body too;
// a known path asked with another method (`methods`: path -> the method it takes) is a 405.
void answer_errors_in_json(httplib::Server& server, const ServeOptions& o, std::map<std::string, std::string> methods) {
  server.set_error_handler([&o, methods](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    auto known = methods.find(req.path);
    if (res.status == 404 && known != methods.end()) {
      res.set_header("Allow", known->second);
      reply(res, 405, {{"error", req.method + " " + req.path + ": method not allowed (expected " + known->second + ")"}});
    } else if (res.status == 404) {
      reply(res, 404, {{"error", "no such endpoint: " + req.method + " " + req.path}});
    } else if (res.status == 413) {
      reply(res, 413, {{"error", fmt::format("the request body is larger than {} bytes (--max-request-bytes)",
                                             o.max_request_bytes)}});
    } else {
      reply(res, res.status, {{"error", "HTTP " + std::to_string(res.status)}});
    }
  });
}

// Binds the port (exclusively: SO_REUSEADDR without the library's SO_REUSEPORT, so that a second
// server on it fails to start rather than taking half of the connections) and returns it.
int bind_exclusively(httplib::Server& server, const ServeOptions& o) {
  // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed when it was
  // built): 64 clients connecting at once overflow it. Its listening socket is taken from the
  // socket-options hook and listened on again with the system's largest backlog.
  int listening_socket = -1;
  server.set_socket_options([&](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening_socket = sock;
  });
  int port = o.port;
  if (port == 0) {
    port = server.bind_to_any_port(o.host);
  } else if (!server.bind_to_port(o.host, port)) {
    port = -1;
  }
  if (port < 0) throw UserError(fmt::format("cannot listen on {}:{}", o.host, o.port));
  if (listening_socket >= 0) ::listen(listening_socket, SOMAXCONN);
  return port;
}

}  // namespace

int serve_command(const ServeOptions& o, const ir::Module& module, Engine& engine, const ServeCores& cores) {
  if (o.max_batch < 1) throw UserError("--max-batch: expected 1 or more");
  if (!(o.max_delay_ms >= 0 && o.max_delay_ms <= 60000)) throw UserError("--max-delay-ms: expected 0 to 60000");
  const ir::Function& f = module.functions[entry_function(module, o.entry)];
  catch_stop_signals();

  Metrics metrics;
  Batcher batcher(o, engine, metrics, cores);
  cores.enter_http();  // this thread and the server's threads it starts
  httplib::Server server;
  const int http_threads = o.http_threads > 0 ? o.http_threads : static_cast<int>(2 * o.max_batch + 8);
  server.new_task_queue = [http_threads] { return new httplib::ThreadPool(static_cast<size_t>(http_threads)); };
  server.set_keep_alive_max_count(100000);  // a client's connection serves all its requests
  server.set_tcp_nodelay(true);  // an answer leaves at once (no Nagle wait for the client's delayed ACK)
  server.set_payload_max_length(o.max_request_bytes);  // a Content-Length over it: 413 before reading

  const std::string predict = "/v1/models/" + o.name + ":predict";
  server.Post(predict, PredictEndpoint(o, f.vars[f.params[0]].type, f.ret, batcher, metrics));
  server.Get("/v1/models/" + o.name, [&](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"model_version_status", {{{"version", "1"}, {"state", "AVAILABLE"}, {"status", {{"error_code", "OK"}}}}}}});
  });
  server.Get("/health", [&](const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"status", "ok"}}); });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.text(), "text/plain; version=0.0.4");
  });
  answer_errors_in_json(server, o, {{predict, "POST"}, {"/v1/models/" + o.name, "GET"}, {"/health", "GET"}, {"/metrics", "GET"}});
  server.set_logger([&](const httplib::Request&, const httplib::Response& res) { metrics.responded(res.status); });

  const int port = bind_exclusively(server, o);
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;  // IPv6
  std::cout << fmt::format("acrobat serve: {} at http://{}:{}{} (batches of up to {} instances, {} ms; {} engine; {})",
                           o.name, host, port, predict, o.max_batch, o.max_delay_ms, engine.name(), cores.describe())
            << std::endl;

  std::thread stopper([&] {
    unsigned char sig = 0;
    while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // listen ended by itself
    std::cout << "acrobat serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
              << ": answering the requests received, then stopping" << std::endl;
    server.stop();
  });
  // Returns once stopped and every connection's handler is done (their instances answered).
  const bool ok = server.listen_after_bind();
  const unsigned char none = 0;
  [[maybe_unused]] ssize_t n = write(stop_pipe[1], &none, 1);  // wakes the stopper if no signal did
  stopper.join();
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  batcher.stop();
  uint64_t answered = 0;
  for (auto [code, n] : metrics.requests) answered += n;
  std::cout << fmt::format("acrobat serve: stopped after {} requests ({} instances in {} batches)", answered,
                           metrics.instances, metrics.batches)
            << std::endl;
  return ok ? 0 : 1;
}

}  // namespace acrobat
