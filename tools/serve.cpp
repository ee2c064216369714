#include "serve.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "analysis/plan.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"
#include "serve_batcher.h"
#include "support/clock.h"
#include "support/diagnostics.h"

namespace acrobat {
namespace {

void reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Invalid UTF-8 (a request's own bytes quoted in an error) is replaced, never a failed answer.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// After an answer given before the request's body was read whole, the connection closes: what the
// client still sends is not a request.
void close_after(httplib::Response& res) {
  res.set_header("Connection", "close");
  if (Connection* c = GuardedServer::current()) c->close_after_answer();
}

void reply_unread(httplib::Response& res, int status, const nlohmann::json& body) {
  reply(res, status, body);
  close_after(res);
}

// The one text of a body over the limit, whoever finds it (the declared Content-Length, the bytes
// of a body without one, the library's own check on other paths).
nlohmann::json too_large(const ServeOptions& o) {
  return {{"error", fmt::format("the request body is larger than {} bytes (--max-request-bytes)",
                                o.limits.max_request_bytes)}};
}

// `text` with the model's path as given and every absolute path of this machine replaced by its
// last part (the model file's name: "treelstm.acr:12:5" for "/home/x/models/treelstm.acr:12:5"), so
// that no answer tells a client where things are. An absolute path is a run of non-blank characters
// that starts with '/' after a blank, a quote, a bracket or the start, and holds a second '/'.
std::string without_paths(std::string text, const std::string& model_path) {
  const std::string file = std::filesystem::path(model_path).filename().string();
  if (!model_path.empty() && model_path != file)
    for (size_t at = text.find(model_path); at != std::string::npos; at = text.find(model_path, at + file.size()))
      text.replace(at, model_path.size(), file);
  auto separator = [](char ch) { return std::string_view(" \t\n'\"([=").find(ch) != std::string_view::npos; };
  auto ends = [&](char ch) { return separator(ch) || ch == ')' || ch == ']' || ch == ','; };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '/' && (i == 0 || separator(text[i - 1]))) {
      size_t end = i;
      while (end < text.size() && !ends(text[end])) ++end;
      const std::string_view path(text.data() + i, end - i);
      const size_t last = path.rfind('/');
      if (last != 0) {
        out += path.substr(last + 1);
        i = end;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

// Equal strings in a time that depends on the length of `secret` only.
bool same_secret(std::string_view given, std::string_view secret) {
  unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i)
    diff |= static_cast<unsigned char>(secret[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

// Whether the request carries `Authorization: Bearer <token>`.
bool authorized(const httplib::Request& req, const std::string& token) {
  std::string h = req.get_header_value("Authorization");
  constexpr std::string_view scheme = "bearer ";
  if (h.size() < scheme.size()) return false;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != scheme[i]) return false;
  size_t begin = scheme.size(), end = h.size();
  while (begin < end && h[begin] == ' ') ++begin;
  while (end > begin && (h[end - 1] == ' ' || h[end - 1] == '\t')) --end;
  return same_secret(std::string_view(h).substr(begin, end - begin), token);
}

// What is wrong with the request's framing, when something is: a Content-Length that is not one
// number of bytes (or comes with a chunked body: two lengths), or one over the limit.
std::optional<std::pair<int, std::string>> framing_error(const httplib::Request& req, const ServeOptions& o) {
  const size_t n = req.get_header_value_count("Content-Length");
  if (n == 0) return std::nullopt;
  if (req.has_header("Transfer-Encoding"))
    return std::make_pair(400, std::string("a request may not have both Content-Length and Transfer-Encoding"));
  const std::string value = req.get_header_value("Content-Length", 0);
  for (size_t i = 1; i < n; ++i)
    if (req.get_header_value("Content-Length", i) != value)
      return std::make_pair(400, std::string("Content-Length is given twice, with different values"));
  const bool number = !value.empty() && value.size() <= 18 &&
                      std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!number)
    return std::make_pair(400, "Content-Length is not a number of bytes: \"" + value.substr(0, 40) + "\"");
  if (std::stoull(value) > o.limits.max_request_bytes)
    return std::make_pair(413, too_large(o)["error"].get<std::string>());
  return std::nullopt;
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
// batcher (a 503 when the queue is full) and answers with their outputs, or with the first error
// among them. While it waits, it looks every 50 ms (or at its deadline, if sooner) whether its
// client is still there and whether its deadline has passed; then its instances not yet in a batch
// are dropped, and the answer is a 499 (to no one) or a 504. Instances already in a batch run on
// to its end (the batch runs whole), their outputs unused; with continuous batching they stop
// where they are.
// An instance's cost for admission by cost (--max-cost): the model's function `cost`, of the
// entry's input type to int, run on the reference engine (one instance at a time: HTTP threads take
// turns), with a step budget of kCostSteps. A failure, or a cost below 0, is the request's 400.
class CostFunction {
 public:
  static constexpr int64_t kCostSteps = 1000000;
  CostFunction(const LoadedModel& m, const ir::Function& entry) : engine_(m.module, m.params) {
    const int f = entry_function(*m.module, "cost");
    const ir::Function& cost = m.module->functions[f];
    const Type& in = entry.vars[entry.params[0]].type;
    if (type_str(cost.vars[cost.params[0]].type) != type_str(in) || cost.ret->kind != TypeKind::Int)
      throw UserError(cost.span.begin, "--max-cost: the model's cost must be cost(x: " + type_str(in) +
                                           ") -> int, of the served entry's input; found cost(x: " +
                                           type_str(cost.vars[cost.params[0]].type) + ") -> " + type_str(cost.ret));
    engine_.limit_steps(kCostSteps);
  }
  int64_t operator()(const Value& instance, size_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t c = engine_.run({instance}, "cost", index).outputs[0].i;
    if (c < 0) throw UserError("instance " + std::to_string(index) + ": its cost(x) is " + std::to_string(c) + ", below 0");
    return c;
  }

 private:
  std::mutex mutex_;
  ReferenceEngine engine_;
};

class PredictEndpoint {
 public:
  PredictEndpoint(const ServeOptions& o, const ServedModel& model, const Type& in_type, const Type& out_type,
                  Batcher& batcher, Metrics& metrics, CostFunction* cost)
      : o_(o), model_(model), in_type_(in_type), out_type_(out_type), batcher_(batcher), metrics_(metrics), cost_(cost) {}

  void operator()(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    const auto arrived = Clock::now();
    auto answer = [&](int status, const nlohmann::json& body) {
      reply(res, status, body);
      metrics_.answered(status, model_.name);
      metrics_.request_seconds.observe(seconds_since(arrived));
    };
    std::string text;
    auto answer_unread = [&](int status, const nlohmann::json& body) {
      answer(status, body);
      close_after(res);
    };
    if (!read_body(req, read, text, answer_unread)) return;
    std::vector<std::shared_ptr<Pending>> items;
    int64_t deadline_ms = 0;
    try {
      items = pending(text, deadline_ms);
    } catch (const nlohmann::json::exception& e) {
      answer(400, {{"error", std::string("the request body is not JSON: ") + e.what()}});
      return;
    } catch (const UserError& e) {
      answer(400, {{"error", without_paths(e.what(), model_.model_path)}});
      return;
    } catch (const InternalError& e) {
      answer(500, {{"error", without_paths(e.what(), model_.model_path)}});
      return;
    }
    std::vector<std::future<std::pair<bool, Value>>> futures;
    for (auto& p : items) futures.push_back(p->done.get_future());
    if (!batcher_.submit(items)) {
      metrics_.count(&Metrics::refused_requests);
      answer(503, {{"error", fmt::format("the queue is full: {} more instances would make more than --max-queue {} "
                                         "waiting; try again later", items.size(), o_.max_queue)}});
      return;
    }
    const auto deadline = deadline_ms > 0 ? arrived + std::chrono::milliseconds(deadline_ms) : Clock::time_point::max();
    if (items[0]->stream) return stream(res, std::move(items), std::move(futures), deadline, deadline_ms, arrived);
    const bool late = wait(req, futures, *items[0]->cancelled, deadline);
    if (late) {  // not waiting for the instances in a batch: their promises outlive these futures
      metrics_.count(&Metrics::late_requests);
      answer(504, late_error(deadline_ms));
      return;
    }
    auto [status, body] = outcome(items, futures);
    answer(status, body);
  }

 private:
  // The body into `text`, read here rather than by the library so that the bound holds whatever
  // the content type (the library caps a form-encoded body, `curl -d`'s default, at 8 KiB); false
  // once `answer_unread` has answered why it could not be.
  template <class Answer>
  bool read_body(const httplib::Request& req, const httplib::ContentReader& read, std::string& text,
                 Answer&& answer_unread) const {
    if (req.is_multipart_form_data()) {
      answer_unread(415, {{"error", "the request body must be JSON {\"instances\": [...]}, not a multipart form"}});
      return false;
    }
    bool too_large_body = false;
    const bool whole = read([&](const char* data, size_t n) {
      if (text.size() + n > o_.limits.max_request_bytes) {
        too_large_body = true;
        return false;
      }
      text.append(data, n);
      return true;
    });
    const Connection* c = GuardedServer::current();
    if (too_large_body) {
      answer_unread(413, too_large(o_));
    } else if (!whole && c && c->timed_out()) {
      answer_unread(408, {{"error", fmt::format("the request did not arrive whole within {} s (--request-timeout; "
                                                "--read-timeout {} s between two bytes)",
                                                o_.limits.request_timeout, o_.limits.read_timeout)}});
    } else if (!whole) {
      answer_unread(400, {{"error", fmt::format("the request body ended after {} bytes, before the end its "
                                                "Content-Length or chunked encoding announced",
                                                text.size())}});
    }
    return whole && !too_large_body;
  }

  using Futures = std::vector<std::future<std::pair<bool, Value>>>;

  nlohmann::json late_error(int64_t deadline_ms) const {
    return {{"error", fmt::format("the request's deadline of {} ms passed before its answer ({})", deadline_ms,
                                  o_.continuous ? "its instances were stopped where they were"
                                                : "its instances not yet in a batch were dropped")}};
  }

  // The answer once every instance is answered: its status and body (the outputs, the first error,
  // or a 499 for a client gone).
  std::pair<int, nlohmann::json> outcome(const std::vector<std::shared_ptr<Pending>>& items, Futures& futures) const {
    nlohmann::json predictions = nlohmann::json::array();
    std::string error;
    bool internal = false, dropped = false;
    for (size_t i = 0; i < items.size(); ++i) {
      auto [ok, out] = futures[i].get();
      dropped = dropped || items[i]->dropped;
      if (!ok && error.empty()) {
        error = items[i]->error;
        internal = items[i]->internal;
      }
      if (ok) predictions.push_back(value_to_json(out, out_type_));
    }
    if (*items[0]->cancelled) {
      if (dropped) metrics_.count(&Metrics::dropped_requests);
      return {499, {{"error", "the client closed its connection before the answer"}}};
    }
    if (!error.empty()) return {internal ? 500 : 400, {{"error", without_paths(error, model_.model_path)}}};
    return {200, {{"predictions", std::move(predictions)}}};
  }

  // A streamed answer ("stream": true): 200 with server-sent events, `data: {"instance": i, "emit":
  // v}` for each value an instance emits as it comes (with --continuous), a comment every second
  // while nothing comes (a client gone is found when it fails), and last the answer a request
  // without "stream" would get, as one event with its "status" (504 past the deadline).
  void stream(httplib::Response& res, std::vector<std::shared_ptr<Pending>> items, Futures futures,
              Clock::time_point deadline, int64_t deadline_ms, Clock::time_point arrived) {
    struct State {
      std::vector<std::shared_ptr<Pending>> items;
      Futures futures;
    };
    auto st = std::make_shared<State>(State{std::move(items), std::move(futures)});
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, st, deadline, deadline_ms, arrived](
                                                               size_t, httplib::DataSink& sink) {
      std::atomic<bool>& cancelled = *st->items[0]->cancelled;
      EventStream& events = *st->items[0]->stream;
      auto finish = [&](int status, nlohmann::json body) {
        metrics_.answered(status, model_.name);
        metrics_.request_seconds.observe(seconds_since(arrived));
        if (status == 499) return false;  // no one to tell
        body["status"] = status;
        const std::string event = "data: " + body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
        sink.write(event.data(), event.size());
        sink.done();
        return true;
      };
      for (auto quiet_since = Clock::now();;) {
        bool done = true;
        for (auto& f : st->futures) done = done && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
        const auto now = Clock::now();
        for (const std::string& e : events.take(done ? now : std::min(deadline, now + std::chrono::milliseconds(50)))) {
          if (!sink.write(e.data(), e.size())) {
            cancelled = true;
            return finish(499, {});
          }
          quiet_since = Clock::now();
        }
        if (done) {
          auto [status, body] = outcome(st->items, st->futures);
          return finish(status, std::move(body));
        }
        if (Clock::now() >= deadline) {
          cancelled = true;
          metrics_.count(&Metrics::late_requests);
          return finish(504, late_error(deadline_ms));
        }
        if (Clock::now() - quiet_since >= std::chrono::seconds(1)) {
          static const std::string ping = ": waiting\n\n";
          if (!sink.write(ping.data(), ping.size())) {
            cancelled = true;
            return finish(499, {});
          }
          quiet_since = Clock::now();
        }
      }
    });
  }

  // The request's instances to queue, and its deadline in ms (the server's when it gives none).
  std::vector<std::shared_ptr<Pending>> pending(const std::string& text, int64_t& deadline_ms) const {
    PredictRequest request = parse_predict_request(text, in_type_);
    deadline_ms = request.deadline_ms > 0 ? request.deadline_ms : o_.deadline_ms;
    std::vector<Value>& values = request.instances;
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    auto stream = request.stream ? std::make_shared<EventStream>() : nullptr;
    const auto queued = Clock::now();
    std::vector<std::shared_ptr<Pending>> items;
    for (size_t i = 0; i < values.size(); ++i) {
      auto p = std::make_shared<Pending>();
      p->input = std::move(values[i]);
      p->index = i;
      p->queued = queued;
      p->priority = request.priority;
      p->cancelled = cancelled;
      p->stream = stream;
      if (cost_) p->cost = (*cost_)(p->input, i);
      items.push_back(std::move(p));
    }
    return items;
  }

  // Until every instance is answered (run, failed or dropped), or until `deadline`: true then (the
  // answer is late). Sets `cancelled` once the client is gone or the deadline passed, so that the
  // batcher drops the instances still queued.
  static bool wait(const httplib::Request& req, std::vector<std::future<std::pair<bool, Value>>>& futures,
                   std::atomic<bool>& cancelled, Clock::time_point deadline) {
    Connection* c = GuardedServer::current();
    for (auto& f : futures)
      for (;;) {
        const auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
        if (f.wait_until(until) == std::future_status::ready) break;
        if (Clock::now() >= deadline) {
          cancelled = true;
          return true;
        }
        if (!cancelled && c && c->client_gone(req.version)) cancelled = true;
      }
    return false;
  }

  const ServeOptions& o_;
  const ServedModel& model_;
  const Type& in_type_;
  const Type& out_type_;
  Batcher& batcher_;
  Metrics& metrics_;
  CostFunction* cost_;  // with --max-cost
};

// Before any route: the request's framing (a bad Content-Length is a 400, one over the limit a
// 413, both before the body is read) and its token when the server wants one (401).
httplib::Server::HandlerResponse screen(const ServeOptions& o, Metrics& metrics,
                                        const std::map<std::string, std::string>& predicts,
                                        const httplib::Request& req, httplib::Response& res) {
  auto answer = [&](int status, const nlohmann::json& body) {
    reply_unread(res, status, body);
    if (auto it = predicts.find(req.path); it != predicts.end()) metrics.answered(status, it->second);
    return httplib::Server::HandlerResponse::Handled;
  };
  if (auto error = framing_error(req, o)) return answer(error->first, {{"error", error->second}});
  if (!o.auth_token.empty() && req.path != "/health" && req.path != "/ready" && !authorized(req, o.auth_token)) {
    res.set_header("WWW-Authenticate", "Bearer");
    return answer(401, {{"error", "this server wants an Authorization: Bearer token"}});
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

// Errors the library answers itself (an unknown path, a request it cannot read, a body over the
// limit on another path) get a JSON body too; a known path asked with another method (`methods`:
// path -> the method it takes) is a 405.
void answer_errors_in_json(GuardedServer& server, const ServeOptions& o, const std::vector<ServedModel>& models,
                           std::map<std::string, std::string> methods) {
  std::string served;  // "the model NAME at POST /v1/models/NAME:predict", or the models' names
  if (models.size() == 1) {
    served = fmt::format("the model {} at POST /v1/models/{}:predict", models[0].name, models[0].name);
  } else {
    for (const ServedModel& m : models) served += (served.empty() ? "" : ", ") + m.name;
    served = "the models " + served + " at POST /v1/models/NAME:predict";
  }
  server.set_error_handler([&o, methods, served](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const Connection* c = GuardedServer::current();
    auto known = methods.find(req.path);
    if (res.status == 404 && known != methods.end()) {
      res.set_header("Allow", known->second);
      reply(res, 405, {{"error", req.method + " " + req.path + ": method not allowed (expected " + known->second + ")"}});
    } else if (res.status == 404) {
      reply(res, 404, {{"error", fmt::format("no such endpoint: {} {} (this server serves {})", req.method, req.path,
                                             served)}});
    } else if (res.status == 413) {
      reply_unread(res, 413, too_large(o));
    } else if (c && c->timed_out()) {
      reply_unread(res, 408, {{"error", fmt::format("the request did not arrive whole within {} s (--request-timeout)",
                                                    o.limits.request_timeout)}});
    } else if (res.status == 400) {
      reply_unread(res, 400, {{"error", "the request line or headers could not be read"}});
    } else {
      reply(res, res.status, {{"error", "HTTP " + std::to_string(res.status)}});
    }
  });
}

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

// GET /v1/models/NAME/metadata: what a client needs to call the model, the types as the language
// prints them.
nlohmann::json metadata(const ServeOptions& o, const ServedModel& m, const ir::Module& module, const ir::Function& f,
                        const Engine& engine) {
  static const std::vector<std::string> none;
  SizeNamesScope names(module.plan ? module.plan->size_names : none);
  nlohmann::json dims = nlohmann::json::object();
  for (const auto& [name, value] : module.dims) dims[name] = value;
  const ir::VarInfo& input = f.vars[f.params[0]];
  return {{"name", m.name},
          {"versions", {"1"}},
          {"platform", "acrobat"},
          {"entry", m.entry},
          {"inputs", {{{"name", input.name}, {"type", type_str(input.type)}}}},
          {"outputs", {{{"type", type_str(f.ret)}}}},
          {"dims", dims},
          {"engine", engine.name()},
          {"batching", {{"max_batch", o.max_batch}, {"max_delay_ms", o.max_delay_ms}, {"continuous", o.continuous},
                        {"max_cost", m.max_cost}}},
          {"content_type", "application/json"}};
}

// What serves a model once it is loaded: its engine, the batcher over it, the predict endpoint.
struct Served {
  Served(const ServeOptions& o, const ServedModel& m, LoadedModel loaded, Metrics& metrics, const ServeCores& cores,
         EngineTurns& turns)
      : model(std::move(loaded)),
        entry(model.module->functions[entry_function(*model.module, m.entry)]),
        cost(m.max_cost > 0 ? std::make_unique<CostFunction>(model, entry) : nullptr),
        batcher(o, m, *model.engine, metrics, cores, turns),
        predict(o, m, entry.vars[entry.params[0]].type, entry.ret, batcher, metrics, cost.get()),
        metadata(acrobat::metadata(o, m, *model.module, entry, *model.engine)) {}
  LoadedModel model;
  const ir::Function& entry;
  std::unique_ptr<CostFunction> cost;  // --max-cost
  Batcher batcher;
  PredictEndpoint predict;
  nlohmann::json metadata;
};

// The served models' slots, each set once its model is loaded (null before: its routes answer 503).
using ServedSlots = std::vector<std::unique_ptr<std::atomic<Served*>>>;

// Every route of the server; a model's own answer 503 until its slot is set.
void add_routes(GuardedServer& server, const ServeOptions& o, const std::vector<ServedModel>& models,
                                 const ServedSlots& served, Metrics& metrics) {
  std::map<std::string, std::string> predicts;  // path -> its model's name
  std::map<std::string, std::string> methods = {{"/health", "GET"}, {"/ready", "GET"}, {"/metrics", "GET"}};
  for (size_t k = 0; k < models.size(); ++k) {
    const std::atomic<Served*>& slot = *served[k];
    const std::string model = "/v1/models/" + models[k].name, predict = model + ":predict";
    const nlohmann::json loading = {
        {"error", "the model " + models[k].name + " is loading; GET /ready says when it is ready"}};
    server.Post(predict, [&slot, &metrics, loading, name = models[k].name](
                             const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      if (Served* s = slot.load()) return s->predict(req, res, read);
      reply_unread(res, 503, loading);
      metrics.answered(503, name);
    });
    server.Get(model, [&slot, &server](const httplib::Request&, httplib::Response& res) {
      const char* state = server.draining() ? "UNLOADING" : slot.load() ? "AVAILABLE" : "LOADING";
      reply(res, 200,
            {{"model_version_status", {{{"version", "1"}, {"state", state}, {"status", {{"error_code", "OK"}}}}}}});
    });
    server.Get(model + "/metadata", [&slot, loading](const httplib::Request&, httplib::Response& res) {
      if (Served* s = slot.load()) return reply(res, 200, s->metadata);
      reply(res, 503, loading);
    });
    predicts[predict] = models[k].name;
    methods[predict] = "POST";
    methods[model] = methods[model + "/metadata"] = "GET";
  }
  server.set_pre_routing_handler([&o, &metrics, predicts](const httplib::Request& req, httplib::Response& res) {
    return screen(o, metrics, predicts, req, res);
  });
  auto all_loaded = [&served] {
    return std::all_of(served.begin(), served.end(), [](const auto& slot) { return slot->load() != nullptr; });
  };
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"status", "ok"}}); });
  server.Get("/ready", [all_loaded, &server](const httplib::Request&, httplib::Response& res) {
    if (server.draining())
      reply(res, 503, {{"status", "stopping"}});
    else if (!all_loaded())
      reply(res, 503, {{"status", "loading"}});
    else
      reply(res, 200, {{"status", "ready"}});
  });
  server.Get("/metrics", [&served, &server, &metrics, &models](const httplib::Request&, httplib::Response& res) {
    Gauges now = server.connection_gauges();
    for (size_t k = 0; k < served.size(); ++k)
      if (Served* s = served[k]->load()) {
        auto [queued, running] = s->batcher.depth();
        now.queued_instances += queued;
        now.running_instances += running;
        now.models.push_back({models[k].name, queued, running});
      }
    res.set_content(metrics.text(now), "text/plain; version=0.0.4");
  });
  answer_errors_in_json(server, o, models, std::move(methods));
  server.set_logger([&metrics](const httplib::Request&, const httplib::Response& res) { metrics.responded(res.status); });
}

void check_options(const ServeOptions& o) {
  if (o.max_batch < 1) throw UserError("--max-batch: expected 1 or more");
  if (!(o.max_delay_ms >= 0 && o.max_delay_ms <= 60000)) throw UserError("--max-delay-ms: expected 0 to 60000");
}

// The stop pipe's next signal (on the calling thread): drains the server on SIGINT or SIGTERM;
// returns at once when the listener ended by itself (it writes a 0).
void await_stop(GuardedServer& server, const ServeOptions& o) {
  unsigned char sig = 0;
  while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  if (sig == 0) return;
  std::cout << fmt::format("acrobat serve: {}: answering the requests in flight (at most {} s), then stopping",
                           sig == SIGINT ? "SIGINT" : "SIGTERM", o.limits.drain_seconds)
            << std::endl;
  if (const size_t cut = server.drain())
    std::cout << fmt::format("acrobat serve: cut {} connection(s) still in a request after --drain-seconds {}", cut,
                             o.limits.drain_seconds)
              << std::endl;
}

}  // namespace

int serve_command(const ServeOptions& o, const std::vector<ServedModel>& models, const ServeCores& cores) {
  check_options(o);
  ACROBAT_ASSERT(!models.empty(), "serve: no model");
  Metrics metrics;
  GuardedServer server(o.limits, metrics);
  server.set_keep_alive_timeout(static_cast<time_t>(o.limits.idle_timeout));  // as the Keep-Alive header says
  server.set_keep_alive_max_count(100000);  // the header's max; a connection serves all its client's requests
  server.set_tcp_nodelay(true);  // an answer leaves at once (no Nagle wait for the client's delayed ACK)
  server.set_payload_max_length(o.limits.max_request_bytes);  // a chunked body on another path than predict
  ServedSlots served;
  for (size_t k = 0; k < models.size(); ++k) served.push_back(std::make_unique<std::atomic<Served*>>(nullptr));
  add_routes(server, o, models, served, metrics);
  const int port = bind_exclusively(server, o);
  catch_stop_signals();

  // /health answers (and /ready says 503) while the models load and compile on this thread.
  std::atomic<bool> listened{true}, listen_ended{false};
  std::thread listener([&] {
    cores.enter_http();  // this thread and the server's threads it starts
    listened = server.listen_after_bind();  // returns once stopped and every connection's thread is done
    listen_ended = true;
    const unsigned char none = 0;
    [[maybe_unused]] ssize_t n = write(stop_pipe[1], &none, 1);  // wakes await_stop if no signal did
  });
  // Server::stop() stops only a server that is listening: from here on it does.
  while (!server.is_running() && !listen_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EngineTurns turns;
  std::vector<std::unique_ptr<Served>> loaded;
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;  // IPv6
  auto stop_all = [&] {
    for (auto& m : loaded) m->batcher.stop();
  };
  try {
    cores.enter_engine();  // the engines' pools start on the engine's cores
    for (size_t k = 0; k < models.size(); ++k) {
      loaded.push_back(std::make_unique<Served>(o, models[k], models[k].load(), metrics, cores, turns));
      *served[k] = loaded.back().get();
      std::cout << fmt::format("acrobat serve: {} at http://{}:{}/v1/models/{}:predict ({} of up to {} instances, {} "
                               "ms; {} engine; {}{})",
                               models[k].name, host, port, models[k].name,
                               o.continuous ? "continuous batching" : "batches", o.max_batch, o.max_delay_ms,
                               loaded.back()->model.engine->name(), cores.describe(),
                               o.auth_token.empty() ? "" : "; a bearer token wanted")
                << std::endl;
    }
  } catch (...) {
    server.stop();
    listener.join();
    stop_all();
    throw;
  }
  await_stop(server, o);
  listener.join();
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  stop_all();
  uint64_t answered = 0;
  for (auto [code, count] : metrics.requests) answered += count;
  std::cout << fmt::format("acrobat serve: stopped after {} requests ({} instances in {} batches)", answered,
                           metrics.instances, metrics.batches)
            << std::endl;
  return listened ? 0 : 1;
}

}  // namespace acrobat
