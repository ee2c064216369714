// The metrics of `acrobat serve`, printed at GET /metrics in Prometheus' text format: counters of
// requests and responses by status, of instances, batches and dropped work; histograms of batch
// size and latencies; gauges of the moment (queue depth, instances running, connections, RSS).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace acrobat {

// A Prometheus histogram with fixed upper bounds (cumulative counts are formed when printed).
class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<double> bounds);
  void observe(double x);
  void print(std::string& out) const;

 private:
  std::string name_, help_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
  mutable std::mutex mutex_;
};

// What /metrics reports of the moment, gathered when it is asked.
struct Gauges {
  size_t queued_instances = 0;   // waiting for a batch
  size_t running_instances = 0;  // in the engine's current run
  size_t open_connections = 0;
  size_t busy_connections = 0;   // in the middle of a request
  struct Model {                 // a served model's own (loaded ones)
    std::string name;
    size_t queued_instances = 0, running_instances = 0;
  };
  std::vector<Model> models;
};

// The process's resident set in bytes (/proc/self/statm), 0 when it cannot be read.
uint64_t resident_bytes();

struct Metrics {
  std::mutex mutex;
  std::map<int, uint64_t> requests;   // predict requests, by HTTP status
  std::map<int, uint64_t> responses;  // every response of every endpoint, by HTTP status
  uint64_t instances = 0, batches = 0, batch_failures = 0, internal_errors = 0;
  uint64_t dropped_requests = 0, dropped_instances = 0;  // of clients gone before their batch ran
  uint64_t refused_connections = 0;                      // over --max-connections
  uint64_t refused_requests = 0;                         // over --max-queue (503)
  uint64_t late_requests = 0;                            // past their deadline (504)
  uint64_t timed_out_requests = 0;                       // not whole within --request-timeout
  uint64_t cut_connections = 0;                          // still busy when a drain ended
  // The same counts per served model, by its name (the families acrobat_model_*, labelled
  // model="NAME"; the totals above sum them).
  struct ModelCounts {
    std::map<int, uint64_t> requests;  // predict requests, by HTTP status
    uint64_t instances = 0;
  };
  std::map<std::string, ModelCounts> models;
  Histogram batch_size;
  Histogram queue_seconds;
  Histogram run_seconds;
  Histogram request_seconds;

  Metrics();
  void answered(int status, const std::string& model);  // a predict request's answer
  void ran(const std::string& model, uint64_t instances);  // instances run to their answer
  // A batch run to its end, `instances` of it to their answer and `failures` not: its counts
  // together, so that a scrape never sees the batch without its instances.
  void ran_batch(const std::string& model, uint64_t instances, uint64_t failures);
  void responded(int status);  // any response
  void count(uint64_t Metrics::*counter, uint64_t n = 1);
  std::string text(const Gauges& now);

 private:
  void add_instances(const std::string& model, uint64_t n);  // with `mutex` held
};

}  // namespace acrobat
