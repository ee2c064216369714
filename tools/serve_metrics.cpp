#include "serve_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

namespace acrobat {

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double x) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin()];
  sum_ += x;
  ++count_;
}

void Histogram::print(std::string& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name_, help_, name_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name_, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name_, count_, name_, sum_, name_, count_);
}

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

namespace {

std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// A family's HELP and TYPE lines.
void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void print_one(std::string& out, const char* name, const char* type, const char* help, uint64_t value) {
  family(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

void print_by_code(std::string& out, const char* name, const char* help, const std::map<int, uint64_t>& counts) {
  family(out, name, "counter", help);
  for (auto [code, n] : counts) out += fmt::format("{}{{code=\"{}\"}} {}\n", name, code, n);
}

}  // namespace

Metrics::Metrics()
    : batch_size("acrobat_batch_size", "Instances per engine run.", {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      queue_seconds("acrobat_queue_seconds", "Time an instance waited for its batch to start.", latency_bounds()),
      run_seconds("acrobat_run_seconds", "Time of one engine run (a batch); with --continuous, an instance's time in the run.", latency_bounds()),
      request_seconds("acrobat_request_seconds", "Time from a predict request's arrival to its answer.",
                      latency_bounds()) {}

void Metrics::answered(int status, const std::string& model) {
  std::lock_guard<std::mutex> lock(mutex);
  ++requests[status];
  ++models[model].requests[status];
}

void Metrics::add_instances(const std::string& model, uint64_t n) {
  instances += n;
  models[model].instances += n;
}

void Metrics::ran(const std::string& model, uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex);
  add_instances(model, n);
}

void Metrics::ran_batch(const std::string& model, uint64_t n, uint64_t failures) {
  std::lock_guard<std::mutex> lock(mutex);
  ++batches;
  batch_failures += failures > 0 ? 1 : 0;
  add_instances(model, n);
}

void Metrics::responded(int status) {
  std::lock_guard<std::mutex> lock(mutex);
  ++responses[status];
}

void Metrics::count(uint64_t Metrics::*counter, uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex);
  this->*counter += n;
}

std::string Metrics::text(const Gauges& now) {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mutex);
    print_by_code(out, "acrobat_requests_total", "Predict requests answered, by HTTP status.", requests);
    print_by_code(out, "acrobat_responses_total", "Responses of every endpoint, by HTTP status.", responses);
    print_one(out, "acrobat_instances_total", "counter", "Instances run.", instances);
    print_one(out, "acrobat_batches_total", "counter", "Engine runs.", batches);
    print_one(out, "acrobat_batch_failures_total", "counter",
              "Batches in which instances failed at run time, run again without them.", batch_failures);
    print_one(out, "acrobat_internal_errors_total", "counter",
              "Batches that met an internal error (a bug in acrobat); their requests were answered 500.",
              internal_errors);
    print_one(out, "acrobat_dropped_requests_total", "counter",
              "Predict requests whose client went away before their batch ran; their instances never ran.",
              dropped_requests);
    print_one(out, "acrobat_dropped_instances_total", "counter", "Instances of the dropped requests.",
              dropped_instances);
    print_one(out, "acrobat_refused_connections_total", "counter",
              "Connections answered 503 because --max-connections were open.", refused_connections);
    print_one(out, "acrobat_refused_requests_total", "counter",
              "Predict requests answered 503 because their instances would have made the queue longer than "
              "--max-queue.",
              refused_requests);
    print_one(out, "acrobat_late_requests_total", "counter",
              "Predict requests answered 504 because their deadline (deadline_ms, or --deadline-ms) passed first.",
              late_requests);
    print_one(out, "acrobat_timed_out_requests_total", "counter",
              "Requests that did not arrive whole within --request-timeout (or --read-timeout between bytes).",
              timed_out_requests);
    print_one(out, "acrobat_cut_connections_total", "counter",
              "Connections still in a request when a drain's --drain-seconds ran out, closed unanswered.",
              cut_connections);
    family(out, "acrobat_model_requests_total", "counter", "Predict requests answered, by model and HTTP status.");
    for (const auto& [name, m] : models)
      for (auto [code, n] : m.requests)
        out += fmt::format("acrobat_model_requests_total{{model=\"{}\",code=\"{}\"}} {}\n", name, code, n);
    family(out, "acrobat_model_instances_total", "counter", "Instances run, by model.");
    for (const auto& [name, m] : models)
      out += fmt::format("acrobat_model_instances_total{{model=\"{}\"}} {}\n", name, m.instances);
  }
  family(out, "acrobat_model_queued_instances", "gauge", "Instances waiting for a batch, by model.");
  for (const Gauges::Model& m : now.models)
    out += fmt::format("acrobat_model_queued_instances{{model=\"{}\"}} {}\n", m.name, m.queued_instances);
  family(out, "acrobat_model_running_instances", "gauge", "Instances in the engine's current run, by model.");
  for (const Gauges::Model& m : now.models)
    out += fmt::format("acrobat_model_running_instances{{model=\"{}\"}} {}\n", m.name, m.running_instances);
  print_one(out, "acrobat_queued_instances", "gauge", "Instances waiting for a batch.", now.queued_instances);
  print_one(out, "acrobat_running_instances", "gauge", "Instances in the engine's current run.", now.running_instances);
  print_one(out, "acrobat_open_connections", "gauge", "Client connections open.", now.open_connections);
  print_one(out, "acrobat_busy_connections", "gauge", "Client connections in the middle of a request.",
            now.busy_connections);
  print_one(out, "acrobat_resident_memory_bytes", "gauge", "Resident set size of the process.", resident_bytes());
  batch_size.print(out);
  queue_seconds.print(out);
  run_seconds.print(out);
  request_seconds.print(out);
  return out;
}

}  // namespace acrobat
