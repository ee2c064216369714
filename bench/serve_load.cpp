// The load client of bench/serve_bench.py: C concurrent clients, each on its own keep-alive
// connection, send one predict request per instance of a JSON-lines file (each line one instance)
// to `acrobat serve` until every instance is sent, twice (a warm-up pass, then the timed one), and
// the timed pass's throughput and latencies are printed as one JSON object. Loopback only; bounded
// by the file (and --limit).
//
//   serve_load --port P --model NAME --instances FILE [--clients C] [--limit N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

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
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(path);
  if (!in) {
    std::cerr << "serve_load: cannot read " << path << "\n";
    return 1;
  }
  std::vector<std::string> bodies;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    bodies.push_back("{\"instances\": [" + line + "]}");
    if (limit && bodies.size() >= limit) break;
  }
  if (bodies.empty()) {
    std::cerr << "serve_load: " << path << " holds no instances\n";
    return 1;
  }
  const std::string target = "/v1/models/" + model + ":predict";
  std::atomic<size_t> failures{0};
  std::vector<double> latency(bodies.size(), 0);
  using Clock = std::chrono::steady_clock;
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
