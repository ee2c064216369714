// The load client of bench/serve_bench.py: C concurrent clients, each on its own keep-alive
// connection, send one predict request per instance of a JSON-lines file (each line one instance)
// to `acrobat serve` until every instance is sent, twice (a warm-up pass, then the timed one), and
// the timed pass's throughput and latencies are printed as one JSON object. Loopback only; bounded
// by the file (and --limit).
// With --rate, an open loop instead (bench/serve_open_bench.py): requests arrive as a Poisson
// process of that many a second for --seconds, cycling through the file, each sent at its time by
// whichever of --clients threads is free, and timed from its arrival (so a request that waits for a
// free thread counts its wait: no coordinated omission). Each body carries "deadline_ms" when
// --deadline-ms is given, which bounds an overloaded server's run. With --stream each request asks
// for a streamed answer ("stream": true) and the time to its first event (the first value the model
// emits, a generation's first token) is reported too. With --latencies every request's latency (ms,
// in the order of arrival) is printed as well, so that the loads of several clients on one server
// (serve_open_bench.py --mixed) can be put together.
//
//   serve_load --port P --model NAME --instances FILE [--clients C] [--limit N]
//   serve_load --port P --model NAME --instances FILE --rate R --seconds S [--clients C] [--seed N]
//       [--deadline-ms D] [--stream] [--latencies]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * double(v.size())))];
}

// The open loop of --rate: prints {"offered", "sent", "ok", "status" counts, "goodput" (answers of
// 200 a second of arrivals), latency percentiles of every request and of the answered ones}.
int open_loop(int port, const std::string& target, const std::vector<std::string>& bodies, double rate,
              double seconds, unsigned seed, int clients, bool stream, bool latencies) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> arrivals;
  for (double t = gap(rng); t < seconds; t += gap(rng)) arrivals.push_back(t);
  std::vector<double> latency(arrivals.size(), 0);
  std::vector<int> status(arrivals.size(), 0);
  std::vector<double> first(arrivals.size(), -1);  // --stream: the first event's time
  std::atomic<size_t> next{0};
  const auto start = Clock::now() + std::chrono::milliseconds(50);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_read_timeout(3600, 0);
      for (size_t i; (i = next.fetch_add(1)) < arrivals.size();) {
        const auto at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
        std::this_thread::sleep_until(at);
        if (!stream) {
          auto res = client.Post(target, bodies[i % bodies.size()], "application/json");
          latency[i] = std::chrono::duration<double>(Clock::now() - at).count();
          status[i] = res ? res->status : -1;
          continue;
        }
        // The answer's last event holds the status; the first "data: " is the first emit (or, for
        // a model that emits nothing, that last event).
        httplib::Request req;
        req.method = "POST";
        req.path = target;
        req.body = bodies[i % bodies.size()];
        req.set_header("Content-Type", "application/json");
        std::string text;
        req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
          text.append(data, n);
          if (first[i] < 0 && text.find("data: ") != std::string::npos)
            first[i] = std::chrono::duration<double>(Clock::now() - at).count();
          return true;
        };
        httplib::Response res;
        httplib::Error error = httplib::Error::Success;
        const bool sent = client.send(req, res, error);
        latency[i] = std::chrono::duration<double>(Clock::now() - at).count();
        const size_t last = text.rfind("\"status\":");
        status[i] = sent && last != std::string::npos ? std::atoi(text.c_str() + last + 9) : -1;
      }
    });
  for (auto& t : threads) t.join();
  const double span = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ok_latency, ok_first;
  std::map<std::string, size_t> by_status;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    ++by_status[std::to_string(status[i])];
    if (status[i] == 200) ok_latency.push_back(latency[i]);
    if (status[i] == 200 && first[i] >= 0) ok_first.push_back(first[i]);
  }
  nlohmann::json out = {{"rate", rate},
                        {"seconds", seconds},
                        {"span_seconds", span},
                        {"sent", arrivals.size()},
                        {"ok", ok_latency.size()},
                        {"status", by_status},
                        {"goodput", double(ok_latency.size()) / seconds},
                        {"p50_ms", 1e3 * percentile(latency, 0.50)},
                        {"p99_ms", 1e3 * percentile(latency, 0.99)},
                        {"p999_ms", 1e3 * percentile(latency, 0.999)},
                        {"ok_p99_ms", 1e3 * percentile(ok_latency, 0.99)},
                        {"max_ms", 1e3 * percentile(latency, 1.0)}};
  if (latencies) {
    std::vector<double> ms(latency.size());
    for (size_t i = 0; i < latency.size(); ++i) ms[i] = 1e3 * latency[i];
    out["latencies_ms"] = ms;
  }
  if (stream) {
    out["first_event_p50_ms"] = 1e3 * percentile(ok_first, 0.50);
    out["first_event_p99_ms"] = 1e3 * percentile(ok_first, 0.99);
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load client for acrobat serve (loopback)"};
  int port = 8500, clients = 1;
  size_t limit = 0;
  std::string model, path;
  app.add_option("--port", port, "The server's port on 127.0.0.1")->required()->check(CLI::Range(1, 65535));
  app.add_option("--model", model, "NAME in /v1/models/NAME:predict")->required();
  app.add_option("--instances", path, "JSON lines, one instance per request")->required();
  app.add_option("--clients", clients, "Concurrent clients")->check(CLI::Range(1, 1024));
  app.add_option("--limit", limit, "At most this many requests (0: one per line)");
  double rate = 0, open_seconds = 10;
  unsigned seed = 1;
  int64_t deadline_ms = 0;
  app.add_option("--rate", rate, "Open loop: requests a second, Poisson arrivals")->check(CLI::Range(0.001, 1e6));
  app.add_option("--seconds", open_seconds, "Open loop: seconds of arrivals (default 10)")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--seed", seed, "Open loop: seed of the arrival times (default 1)");
  bool stream = false;
  app.add_flag("--stream", stream, "Open loop: streamed answers; report the time to the first event");
  bool latencies = false;
  app.add_flag("--latencies", latencies, "Open loop: print every request's latency too (latencies_ms)");
  app.add_option("--deadline-ms", deadline_ms, "Each request's deadline_ms (default: none)")->check(CLI::Range(1, 3600000));
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(path);
  if (!in) {
    std::cerr << "serve_load: cannot read " << path << "\n";
    return 1;
  }
  std::vector<std::string> bodies;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    bodies.push_back("{\"instances\": [" + line + "]" +
                     (deadline_ms > 0 ? ", \"deadline_ms\": " + std::to_string(deadline_ms) : std::string()) +
                     (stream ? ", \"stream\": true" : "") + "}");
    if (limit && bodies.size() >= limit) break;
  }
  if (bodies.empty()) {
    std::cerr << "serve_load: " << path << " holds no instances\n";
    return 1;
  }
  const std::string target = "/v1/models/" + model + ":predict";
  if (rate > 0) return open_loop(port, target, bodies, rate, open_seconds, seed, clients, stream, latencies);
  std::atomic<size_t> failures{0};
  std::vector<double> latency(bodies.size(), 0);
  // Every request is sent twice: a warm-up pass (the server's first batches allocate what later
  // ones reuse), then the timed pass.
  double seconds = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::atomic<size_t> next{0};
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&] {
        httplib::Client client("127.0.0.1", port);
        client.set_keep_alive(true);
        client.set_tcp_nodelay(true);  // headers and body are two writes: no Nagle wait between them
        client.set_read_timeout(60, 0);
        for (size_t i; (i = next.fetch_add(1)) < bodies.size();) {
          const auto t0 = Clock::now();
          auto res = client.Post(target, bodies[i], "application/json");
          latency[i] = std::chrono::duration<double>(Clock::now() - t0).count();
          if (!res || res->status != 200) ++failures;
        }
      });
    for (auto& t : threads) t.join();
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::vector<double> sorted = latency;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * double(sorted.size())))]; };
  nlohmann::json out = {{"clients", clients},          {"requests", bodies.size()},
                        {"failures", failures.load()}, {"seconds", seconds},
                        {"requests_per_second", double(bodies.size()) / seconds},
                        {"p50_ms", 1e3 * pct(0.50)},   {"p99_ms", 1e3 * pct(0.99)},
                        {"max_ms", 1e3 * sorted.back()}};
  std::cout << out.dump() << std::endl;
  return failures.load() == 0 ? 0 : 1;
}
