#include "engines/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "acrobat/kernels.h"
#include "analysis/plan.h"
#include "engines/inputs.h"
#include "io/safetensors.h"
#include "runtime/thread_pool.h"
#include "support/diagnostics.h"
#include "support/clock.h"
#include "support/surface.h"

namespace acrobat {

void check_optimizer(const OptimizerOptions& o) {
  if (o.kind != "adam" && o.kind != "sgd")
    throw UserError(given("--optimizer", o.kind) + ": expected adam or sgd");
  auto positive = [](const char* flag, double v) {
    if (!(v > 0) || !std::isfinite(v)) throw UserError(argument(flag) + ": expected a number > 0, found " + std::to_string(v));
  };
  auto non_negative = [](const char* flag, double v) {
    if (!(v >= 0) || !std::isfinite(v)) throw UserError(argument(flag) + ": expected a number >= 0, found " + std::to_string(v));
  };
  positive("--lr", o.lr);
  non_negative("--momentum", o.momentum);
  non_negative("--weight-decay", o.weight_decay);
  non_negative("--clip", o.clip_norm);
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    throw UserError(argument("--betas") + ": Adam's betas must lie in [0, 1)");
  positive("--eps", o.eps);
  if (o.sparse_embeddings && o.weight_decay > 0)
    throw UserError(argument("--sparse-embeddings") + ": not with " + argument("--weight-decay") +
                    " (weight decay reaches every row of a table, so its update cannot be lazy)");
}

Optimizer::Optimizer(OptimizerOptions options, const ParamStore& params, int threads) : o_(std::move(options)) {
  check_optimizer(o_);
  for (const ParamValue& p : params.params) {
    const auto n = static_cast<size_t>(p.frozen ? 0 : p.tensor.size());  // a frozen param takes no step
    m_.emplace_back(n, 0.0f);
    if (o_.kind == "adam") v_.emplace_back(n, 0.0f);
    live_.emplace_back((n + kGradChunk - 1) / kGradChunk, uint8_t{0});
  }
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads);
}

Optimizer::~Optimizer() = default;

double Optimizer::step(const ParamStore& params, std::vector<Tensor>& grads, float grad_scale,
                       const WrittenChunks* written) {
  ACROBAT_ASSERT(grads.size() == params.params.size(), "one gradient per param");
  if (written && written->empty()) written = nullptr;
  ACROBAT_ASSERT(!written || written->size() == grads.size(), "written chunks per param");
  ++t_;
  // The pieces of work: every param cut at multiples of kPiece elements (the cut does not change the
  // bits, kernels::adam_update's elements are independent).
  constexpr int64_t kPiece = int64_t{1} << 16;
  struct Piece {
    size_t param;
    int64_t begin, end;
  };
  // Per param: the elements of a row that takes lazy updates (sparse embeddings), else 0. Such a
  // param's pieces are whole rows.
  std::vector<int64_t> lazy_row(grads.size(), 0);
  std::vector<Piece> pieces;
  for (size_t k = 0; k < grads.size(); ++k) {
    const ParamValue& pv = params.params[k];
    if (pv.frozen) continue;  // neither stepped nor counted in the clipping norm
    if (o_.sparse_embeddings && pv.count > 0) lazy_row[k] = std::max<int64_t>(1, num_elements(pv.elem_shape));
    const int64_t cut = lazy_row[k] ? std::max<int64_t>(1, kPiece / lazy_row[k]) * lazy_row[k] : kPiece;
    for (int64_t b = 0, n = grads[k].size(); b < n; b += cut) pieces.push_back({k, b, std::min(n, b + cut)});
  }
  auto for_pieces = [&](FunctionRef<void(const Piece&)> fn) {
    for_each_piece(pool_.get(), static_cast<int64_t>(pieces.size()), [&](int64_t i, int) { fn(pieces[size_t(i)]); });
  };

  double norm = -1;  // unknown unless clipping
  float scale = grad_scale;
  if (o_.clip_norm > 0) {
    // Sums per piece, added in piece order: the same bits whatever the threads.
    std::vector<double> sums(pieces.size());
    for_pieces([&](const Piece& piece) {
      sums[size_t(&piece - pieces.data())] =
          kernels::sum_squares(grads[piece.param].data.get() + piece.begin, size_t(piece.end - piece.begin));
    });
    double sq = 0;
    for (double s : sums) sq += s;
    norm = std::sqrt(sq) * grad_scale;
    if (norm + 1e-6 > o_.clip_norm) scale = static_cast<float>(grad_scale * (o_.clip_norm / (norm + 1e-6)));
  }
  const double bias1 = 1 - std::pow(o_.beta1, double(t_)), bias2 = 1 - std::pow(o_.beta2, double(t_));
  const kernels::AdamStep adam{scale,
                               static_cast<float>(o_.weight_decay),
                               static_cast<float>(o_.beta1),
                               static_cast<float>(o_.beta2),
                               static_cast<float>(o_.eps),
                               static_cast<float>(o_.lr / bias1),
                               static_cast<float>(std::sqrt(bias2))};
  const kernels::SgdStep sgd{scale, static_cast<float>(o_.weight_decay), static_cast<float>(o_.lr),
                             static_cast<float>(o_.momentum), t_ == 1};
  const bool is_adam = o_.kind == "adam";
  // Without weight decay, an element whose state is zero and whose gradient is zero keeps its
  // value, and its state stays zero, bit for bit (m = v = 0, the step 0): such chunks are skipped.
  // They are the rows of an embedding no instance has used yet; an epoch over part of the data
  // leaves most of a large vocabulary's rows so.
  const bool skip_idle = o_.weight_decay == 0;
  static_assert((int64_t{1} << 16) % kGradChunk == 0, "a piece is whole chunks");
  for_pieces([&](const Piece& piece) {
    const size_t k = piece.param;
    float* const p = params.params[k].tensor.data.get();
    float* const g = grads[k].data.get();
    float* const m = m_[k].data();
    float* const v = is_adam ? v_[k].data() : nullptr;
    uint8_t* const live = live_[k].data();
    const uint8_t* const wrote = written ? (*written)[k].data() : nullptr;
    auto update = [&](int64_t b, int64_t e) {
      if (b == e) return;
      if (is_adam)
        kernels::adam_update(adam, p + b, g + b, m + b, v + b, size_t(e - b));
      else
        kernels::sgd_update(sgd, p + b, g + b, m + b, size_t(e - b));
    };
    if (const int64_t row = lazy_row[k]) {
      // Lazy rows: consecutive rows that take the step are updated together. A row whose chunks the
      // gradient did not write is zero without reading it.
      int64_t run = piece.begin;
      for (int64_t r0 = piece.begin; r0 < piece.end; r0 += row) {
        const int64_t r1 = std::min(piece.end, r0 + row);
        bool maybe = !wrote;
        for (int64_t c = r0 / kGradChunk; !maybe && c <= (r1 - 1) / kGradChunk; ++c) maybe = wrote[c] != 0;
        if (!maybe || kernels::all_zero(g + r0, size_t(r1 - r0))) {
          update(run, r0);
          run = r1;
        }
      }
      update(run, piece.end);
      return;
    }
    if (!skip_idle) {
      update(piece.begin, piece.end);
      return;
    }
    int64_t run = piece.begin;  // the chunks from `run` on are updated together
    for (int64_t c0 = piece.begin; c0 < piece.end; c0 += kGradChunk) {
      const int64_t c1 = std::min(piece.end, c0 + kGradChunk);
      uint8_t& l = live[c0 / kGradChunk];
      if (!l && (wrote ? !wrote[c0 / kGradChunk] : kernels::all_zero(g + c0, size_t(c1 - c0)))) {
        update(run, c0);
        run = c1;
        continue;
      }
      l = 1;
    }
    update(run, piece.end);
  });
  refresh_packed(params);
  return norm;
}

void write_param_tensors(const ir::Module& module, const std::vector<const Tensor*>& tensors,
                         const std::string& path, const std::map<std::string, std::string>& metadata) {
  ACROBAT_ASSERT(tensors.size() == module.params.size(), "one tensor per param");
  std::vector<io::NamedTensor> named;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (!tensors[k]) continue;
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

StepResult train_step(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                      const std::vector<Value>& batch, const std::string& loss_entry, OnError on_error,
                      const std::vector<size_t>& numbers) {
  ACROBAT_ASSERT(!batch.empty(), "a step on at least one instance");
  std::vector<Tensor>& grads = optimizer.grad_buffers();
  StepResult r;
  GradResult g;
  auto gradient = [&](const std::vector<Value>& in) {
    g = engine.gradients(in, loss_entry, 0, std::move(grads));  // a failed run leaves `grads` empty
    r.instances = in.size();
  };
  if (on_error == OnError::Raise) {
    gradient(batch);
  } else {
    const std::vector<size_t> kept = call_leaving_out_failures(batch, gradient, [&](size_t i, const UserError& e) {
      const size_t number = numbers.empty() ? i : numbers[i];
      r.skipped.push_back({number, for_instance(e, number).what()});
    });
    if (kept.empty()) return r;
  }
  for (const Value& v : g.outputs) r.loss_sum += v.tensor->data[0];
  r.backward_seconds = g.stats.backward_seconds;
  r.peak_bytes = g.stats.peak_bytes;
  // The gradient of the batch's mean loss.
  const auto update = Clock::now();
  optimizer.step(params, g.grads, 1.0f / static_cast<float>(r.instances), &g.written);
  r.update_seconds = seconds_since(update);
  grads = std::move(g.grads);
  return r;
}

Epoch::Epoch(size_t instances, size_t batch, std::mt19937_64& rng, OnError on_error)
    : order_(instances), batch_(batch), on_error_(on_error) {
  ACROBAT_ASSERT(batch > 0, "a batch of at least one instance");
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);
}

const EpochResult& Epoch::step(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                               const std::vector<Value>& train, const std::string& loss_entry) {
  ACROBAT_ASSERT(!done() && train.size() == order_.size(), "a step of an unfinished epoch on its instances");
  const auto start = Clock::now();
  const size_t b1 = std::min(order_.size(), next_ + batch_);
  part_.clear();
  numbers_.clear();
  for (size_t i = next_; i < b1; ++i) {
    part_.push_back(train[order_[i]]);
    numbers_.push_back(order_[i]);  // in messages and `skipped`: its index in `train`
  }
  StepResult step = train_step(engine, optimizer, params, part_, loss_entry, on_error_, numbers_);
  r_.backward_seconds += step.backward_seconds;
  r_.update_seconds += step.update_seconds;
  r_.peak_bytes = std::max(r_.peak_bytes, step.peak_bytes);
  total_ += step.loss_sum;
  if (step.instances > 0) r_.batch_losses.push_back(step.loss_sum / double(step.instances));
  r_.instances += step.instances;
  next_ = b1;
  r_.mean_loss = r_.instances ? total_ / double(r_.instances) : 0;
  for (InstanceFailure& f : step.skipped) {
    auto at = std::upper_bound(r_.skipped.begin(), r_.skipped.end(), f.instance,
                               [](size_t i, const InstanceFailure& g) { return i < g.instance; });
    r_.skipped.insert(at, std::move(f));
  }
  r_.seconds += seconds_since(start);
  return r_;
}

EpochResult train_epoch(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                        const std::vector<Value>& train, size_t batch, std::mt19937_64& rng,
                        const std::string& loss_entry, const std::function<void(size_t, double, double)>& progress,
                        OnError on_error) {
  Epoch epoch(train.size(), batch, rng, on_error);
  while (!epoch.done()) {
    const EpochResult& r = epoch.step(engine, optimizer, params, train, loss_entry);
    if (progress) progress(epoch.position(), r.mean_loss, r.seconds);
  }
  return epoch.result();
}

double accuracy(Engine& engine, const std::vector<Value>& inputs, const std::vector<int>& labels,
                const std::string& entry, size_t batch) {
  if (inputs.size() != labels.size())
    throw UserError(std::to_string(inputs.size()) + " instances but " + std::to_string(labels.size()) + " labels");
  if (inputs.empty()) return 0;
  RunResult r = engine.run_batches(inputs, batch, entry);
  size_t right = 0;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const Tensor& t = *r.outputs[i].tensor;
    if (labels[i] < 0 || labels[i] >= t.size())
      throw for_instance(UserError("label " + std::to_string(labels[i]) + " is not one of the " +
                                   std::to_string(t.size()) + " classes of '" + entry + "' (0 to " +
                                   std::to_string(t.size() - 1) + ")"),
                         i);
    int64_t best = 0;
    for (int64_t j = 1; j < t.size(); ++j)
      if (t.data[j] > t.data[best]) best = j;
    right += best == labels[i];
  }
  return double(right) / double(inputs.size());
}

HeldOut read_held_out(const ir::Module& module, const std::string& name, const std::string& spec_text,
                      const std::string& vocab, const std::string& loss_entry, const std::string& predict_entry,
                      size_t limit) {
  HeldOut h{name, {}, {}, {}};
  const InputSpec spec = parse_input_spec(spec_text);
  const std::string words = vocab_path(spec, vocab);
  auto function = [&](const std::string& entry) -> const ir::Function& {
    return module.functions[entry_function(module, entry)];
  };
  auto input_type = [](const ir::Function& f) { return f.vars[f.params[0]].type; };
  SizeNamesScope names(module.plan->size_names);
  h.loss = load_inputs(spec, input_type(function(loss_entry)), words, limit);
  if (has_root_labels(spec)) {
    const ir::Function& f = function(predict_entry);
    if (f.ret->kind != TypeKind::Tensor || is_ragged(f.ret->shape))
      throw UserError(f.span.begin, given("--predict", predict_entry) + " returns " + type_str(f.ret) +
                                        "; the accuracy needs a tensor of scores, one per class");
    h.predict = load_inputs(spec, input_type(f), words, limit);
    h.labels = sst_root_labels(spec, h.predict.size());
  }
  return h;
}

Evaluation evaluate(Engine& engine, const HeldOut& held, size_t batch, const std::string& loss_entry,
                    const std::string& predict_entry) {
  Evaluation e;
  if (held.loss.empty()) return e;
  double sum = 0;
  for (const Value& v : engine.run_batches(held.loss, batch, loss_entry).outputs) sum += v.tensor->data[0];
  e.loss = sum / double(held.loss.size());
  if (!held.predict.empty()) {
    e.has_accuracy = true;
    e.accuracy = accuracy(engine, held.predict, held.labels, predict_entry, batch);
    e.instances = held.predict.size();
  }
  return e;
}

}  // namespace acrobat
