// Training a model with an engine's gradients (Engine::gradients): the optimisers, checkpoints and
// the epoch loop `acrobat train` runs. The params are updated in place, so the engine that computes
// the gradients keeps its pointers (and, after refresh_packed, its packed weights) across steps.
//
// The update follows PyTorch's definitions, so that a model trained here and one trained by PyTorch
// from the same weights, order and settings follow each other: the batch's loss is the mean of its
// instances' losses; clipping scales the whole gradient to a global L2 norm of at most `clip_norm`
// (torch.nn.utils.clip_grad_norm_, with its 1e-6); weight decay adds weight_decay * param to the
// gradient; SGD keeps a momentum buffer b = momentum * b + g (b = g at the first step) and steps by
// lr * b; Adam steps by lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
//
// Sparse embeddings (OptimizerOptions::sparse_embeddings, `acrobat train --sparse-embeddings`): the
// rows of an indexed param (a table `p[N]: f32[...]`, one row per tensor) take lazy updates, as
// PyTorch's SparseAdam and DyNet's sparse updates give the rows a step looked up: a row whose
// gradient in the step is non-zero takes the step (Adam's moments or SGD's momentum buffer and its
// value, with t counting every step for Adam's bias corrections, as SparseAdam's); any other row,
// its state included, is left as it is. A row that steps follows the formula above, as the dense
// update (SparseAdam adds eps to sqrt(v) before the bias correction instead of after); a row looked
// up whose whole gradient is exactly zero takes no step here, where SparseAdam would decay its
// moments. The other params keep the dense update.
// The step then costs the rows a batch touches instead of the whole table. Weight decay, which
// reaches every row, is not lazy: asking for both is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engines/engine.h"

namespace acrobat {

struct OptimizerOptions {
  std::string kind = "adam";  // "adam" or "sgd"
  double lr = 1e-3;
  double momentum = 0.9;  // sgd (0: plain SGD)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
  double weight_decay = 0;
  double clip_norm = 0;  // 0: no clipping
  bool sparse_embeddings = false;  // lazy updates of indexed params' rows (above)
};

// Checks the options (a UserError naming the option for an unknown kind or a value out of range).
void check_optimizer(const OptimizerOptions& o);

class ThreadPool;

class Optimizer {
 public:
  // `threads` > 1: the updates are split over a pool of that many threads (the same bits as one).
  Optimizer(OptimizerOptions options, const ParamStore& params, int threads = 1);
  ~Optimizer();
  // One step on `params` (in place, packed copies refreshed) with the gradient grads * grad_scale
  // (grads: the gradient of the batch's summed loss, grad_scale = 1 / batch for its mean), clipped
  // and decayed on the fly. `grads` are left zero, ready for the next gradient (Engine::gradients'
  // `zeroed`). Returns the gradient's norm before clipping when clipping, else -1.
  // `written` (optional, GradResult::written): the chunks the gradient may be non-zero in; the
  // others are known to be zero without reading them.
  double step(const ParamStore& params, std::vector<Tensor>& grads, float grad_scale = 1.0f,
              const WrittenChunks* written = nullptr);
  int64_t steps() const { return t_; }
  // Buffers for the gradients of the steps of one training (train_step's), kept across epochs:
  // left zero by each step, they are never allocated and cleared again.
  std::vector<Tensor>& grad_buffers() { return grads_; }

 private:
  OptimizerOptions o_;
  int64_t t_ = 0;
  std::vector<std::vector<float>> m_, v_;  // per param: momentum / Adam's moments
  // Per param, per chunk of kGradChunk elements: whether its state (m_, v_) may be non-zero.
  std::vector<std::vector<uint8_t>> live_;
  std::vector<Tensor> grads_;
  std::unique_ptr<ThreadPool> pool_;
};

// One tensor per param of `module` (the params themselves, or their gradients) as safetensors under
// the params' names, with the shapes --params reads back; a null tensor is left out (a frozen
// param's gradient).
void write_param_tensors(const ir::Module& module, const std::vector<const Tensor*>& tensors,
                         const std::string& path, const std::map<std::string, std::string>& metadata = {});
// The params' current values so.
void write_checkpoint(const ir::Module& module, const ParamStore& params, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

// One step: the gradient of `batch`'s mean loss on `engine` (in the optimiser's gradient buffers,
// left zero again by its update) and one update of `params`.
// With OnError::Skip an instance whose forward run fails is left out of the step (the gradient is
// of the others' mean loss; none left: no update) and reported in `skipped`, numbered by
// `numbers[i]` for batch[i] (default: i).
struct StepResult {
  double loss_sum = 0;  // of the batch's instances
  size_t instances = 0;  // in the step: the batch's, less those skipped
  double backward_seconds = 0, update_seconds = 0;
  int64_t peak_bytes = 0;  // RunStats::peak_bytes of the gradient
  std::vector<InstanceFailure> skipped;
};
StepResult train_step(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                      const std::vector<Value>& batch, const std::string& loss_entry,
                      OnError on_error = OnError::Raise, const std::vector<size_t>& numbers = {});

// One epoch: `train` in a random order drawn from `rng` (Fisher-Yates, the same order for the same
// seed on any machine), in batches of `batch`, one gradient and one step per batch.
// `progress(done, mean_loss_so_far, seconds)` after each batch.
struct EpochResult {
  double mean_loss = 0;  // over the epoch's instances
  double seconds = 0;
  double backward_seconds = 0, update_seconds = 0;  // of `seconds`: reverse passes, optimiser steps
  int64_t peak_bytes = 0;  // the most any step's gradient held (RunStats::peak_bytes)
  size_t instances = 0;
  std::vector<double> batch_losses;  // mean loss of each batch, in order
  std::vector<InstanceFailure> skipped;  // OnError::Skip: by index in `train`, ascending
};
EpochResult train_epoch(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                        const std::vector<Value>& train, size_t batch, std::mt19937_64& rng,
                        const std::string& loss_entry,
                        const std::function<void(size_t, double, double)>& progress = {},
                        OnError on_error = OnError::Raise);

// One epoch step by step: the order drawn from `rng` when it is made, then one step per call.
// train_epoch runs every step; a caller that must do something between steps without the engine
// (the Python package calls back into Python with the model unlocked) runs them one at a time, with
// the same bits. `seconds` counts the steps only, not what runs between them.
class Epoch {
 public:
  Epoch(size_t instances, size_t batch, std::mt19937_64& rng, OnError on_error = OnError::Raise);
  bool done() const { return next_ >= order_.size(); }
  // The instances the steps so far took (those skipped included).
  size_t position() const { return next_; }
  // The next batch's gradient and update; the figures so far (mean_loss: of the instances so far).
  const EpochResult& step(Engine& engine, Optimizer& optimizer, const ParamStore& params,
                          const std::vector<Value>& train, const std::string& loss_entry);
  const EpochResult& result() const { return r_; }

 private:
  std::vector<size_t> order_;
  size_t batch_, next_ = 0;
  OnError on_error_;
  double total_ = 0;
  EpochResult r_;
  std::vector<Value> part_;
  std::vector<size_t> numbers_;
};

// The share of `inputs` whose output of `entry` (a [1, C] or [C] tensor of scores) has its largest
// score at `labels[i]` (ties: the first). A UserError when the counts differ or a label is not one
// of the C classes (naming the instance).
double accuracy(Engine& engine, const std::vector<Value>& inputs, const std::vector<int>& labels,
                const std::string& entry, size_t batch);

// A held-out set (dev or test) as a training evaluates it: the loss entry's instances, for the
// mean loss, and for SST (trees or their sentences) also the predicting entry's instances with
// their roots' labels, for the accuracy.
struct HeldOut {
  std::string name;  // "dev", "test": the prefix of its figures
  std::vector<Value> loss, predict;
  std::vector<int> labels;
};
// Reads at most `limit` instances (0: all) of the input `spec` ("KIND:FILE") for `loss_entry` and,
// when it holds SST trees or sentences, for `predict_entry` (which must return a tensor of scores,
// one per class: a positioned UserError otherwise). `vocab`: as inputs.h's vocab_path takes it.
HeldOut read_held_out(const ir::Module& module, const std::string& name, const std::string& spec,
                      const std::string& vocab, const std::string& loss_entry, const std::string& predict_entry,
                      size_t limit);

// A held-out set's figures: its mean loss and, when it has labels, its accuracy.
struct Evaluation {
  double loss = 0;
  bool has_accuracy = false;
  double accuracy = 0;
  size_t instances = 0;  // of the accuracy
};
Evaluation evaluate(Engine& engine, const HeldOut& held, size_t batch, const std::string& loss_entry,
                    const std::string& predict_entry);

}  // namespace acrobat
