#include "runtime/train.h"

#include <chrono>
#include <cmath>

#include "io/safetensors.h"
#include "support/diagnostics.h"

namespace acrobat {

void check_optimizer(const OptimizerOptions& o) {
  if (o.kind != "adam" && o.kind != "sgd")
    throw UserError("--optimizer '" + o.kind + "': expected adam or sgd");
  auto positive = [](const char* name, double v) {
    if (!(v > 0) || !std::isfinite(v)) throw UserError(std::string(name) + ": expected a number > 0, found " + std::to_string(v));
  };
  auto non_negative = [](const char* name, double v) {
    if (!(v >= 0) || !std::isfinite(v)) throw UserError(std::string(name) + ": expected a number >= 0, found " + std::to_string(v));
  };
  positive("--lr", o.lr);
  non_negative("--momentum", o.momentum);
  non_negative("--weight-decay", o.weight_decay);
  non_negative("--clip", o.clip_norm);
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    throw UserError("Adam's betas must lie in [0, 1)");
  positive("eps", o.eps);
}

Optimizer::Optimizer(OptimizerOptions options, const ParamStore& params) : o_(std::move(options)) {
  check_optimizer(o_);
  for (const ParamValue& p : params.params) {
    m_.emplace_back(static_cast<size_t>(p.tensor.size()), 0.0f);
    if (o_.kind == "adam") v_.emplace_back(static_cast<size_t>(p.tensor.size()), 0.0f);
  }
}

double Optimizer::step(const ParamStore& params, std::vector<Tensor>& grads) {
  ACROBAT_ASSERT(grads.size() == params.params.size(), "one gradient per param");
  ++t_;
  double sq = 0;
  for (const Tensor& g : grads)
    for (int64_t j = 0; j < g.size(); ++j) sq += double(g.data[j]) * g.data[j];
  const double norm = std::sqrt(sq);
  const float clip = o_.clip_norm > 0 && norm + 1e-6 > o_.clip_norm ? static_cast<float>(o_.clip_norm / (norm + 1e-6)) : 1.0f;
  const float lr = static_cast<float>(o_.lr), wd = static_cast<float>(o_.weight_decay);
  const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2), eps = static_cast<float>(o_.eps);
  const float mom = static_cast<float>(o_.momentum);
  const double bias1 = 1 - std::pow(o_.beta1, double(t_)), bias2 = 1 - std::pow(o_.beta2, double(t_));
  const float step_size = static_cast<float>(o_.lr / bias1), sqrt_bias2 = static_cast<float>(std::sqrt(bias2));
  for (size_t k = 0; k < grads.size(); ++k) {
    float* p = params.params[k].tensor.data.get();
    float* g = grads[k].data.get();
    float* m = m_[k].data();
    const int64_t n = grads[k].size();
    if (o_.kind == "sgd") {
      for (int64_t j = 0; j < n; ++j) {
        const float gj = g[j] * clip + wd * p[j];
        m[j] = mom > 0 ? (t_ == 1 ? gj : mom * m[j] + gj) : gj;
        p[j] -= lr * m[j];
      }
      continue;
    }
    float* v = v_[k].data();
    for (int64_t j = 0; j < n; ++j) {
      const float gj = g[j] * clip + wd * p[j];
      m[j] = b1 * m[j] + (1 - b1) * gj;
      v[j] = b2 * v[j] + (1 - b2) * gj * gj;
      p[j] -= step_size * m[j] / (std::sqrt(v[j]) / sqrt_bias2 + eps);
    }
  }
  refresh_packed(params);
  return norm;
}

void write_param_tensors(const ir::Module& module, const std::vector<const Tensor*>& tensors,
                         const std::string& path, const std::map<std::string, std::string>& metadata) {
  ACROBAT_ASSERT(tensors.size() == module.params.size(), "one tensor per param");
  std::vector<io::NamedTensor> named;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    named.push_back({module.params[k].name, t.shape, std::vector<float>(t.data.get(), t.data.get() + t.size())});
  }
  io::write_safetensors(path, named, metadata);
}

void write_checkpoint(const ir::Module& module, const ParamStore& params, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<const Tensor*> tensors;
  for (const ParamValue& p : params.params) tensors.push_back(&p.tensor);
  write_param_tensors(module, tensors, path, metadata);
}

EpochResult train_epoch(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                        const std::vector<Value>& train, size_t batch, std::mt19937_64& rng,
                        const std::string& loss_entry, const std::function<void(size_t, double, double)>& progress) {
  ACROBAT_ASSERT(batch > 0, "a batch of at least one instance");
  const auto start = std::chrono::steady_clock::now();
  std::vector<size_t> order(train.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  EpochResult r;
  double total = 0;
  std::vector<Value> part;
  for (size_t b0 = 0; b0 < order.size(); b0 += batch) {
    const size_t b1 = std::min(order.size(), b0 + batch);
    part.clear();
    for (size_t i = b0; i < b1; ++i) part.push_back(train[order[i]]);
    GradResult g = engine.gradients(part, loss_entry);
    double sum = 0;
    for (const Value& v : g.outputs) sum += v.tensor->data[0];
    const float scale = 1.0f / static_cast<float>(part.size());  // the batch's mean loss
    for (Tensor& t : g.grads)
      for (int64_t j = 0; j < t.size(); ++j) t.data[j] *= scale;
    optimizer.step(params, g.grads);
    total += sum;
    r.batch_losses.push_back(sum / double(part.size()));
    r.instances = b1;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(b1, total / double(b1), r.seconds);
  }
  r.mean_loss = r.instances ? total / double(r.instances) : 0;
  return r;
}

double accuracy(Engine& engine, const std::vector<Value>& inputs, const std::vector<int>& labels,
                const std::string& entry, size_t batch) {
  ACROBAT_ASSERT(inputs.size() == labels.size(), "one label per input");
  if (inputs.empty()) return 0;
  RunResult r = engine.run_batches(inputs, batch, entry);
  size_t right = 0;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const Tensor& t = *r.outputs[i].tensor;
    int64_t best = 0;
    for (int64_t j = 1; j < t.size(); ++j)
      if (t.data[j] > t.data[best]) best = j;
    right += best == labels[i];
  }
  return double(right) / double(inputs.size());
}

}  // namespace acrobat
