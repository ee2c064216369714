// `acrobat train`: epochs of batched gradients and optimiser steps on the loss entry, the dev set's
// accuracy (SST: the root's label against the argmax of the predicting entry) and mean loss after
// each epoch, a checkpoint after each epoch, the test set at the end; a JSON log and a PNG of the
// curves.
#include <unistd.h>

#include <iostream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_options.h"
#include "commands/command.h"
#include "commands/common.h"
#include "engines/train.h"
#include "io/files.h"

namespace acrobat::cli {

namespace {

struct TrainOptions {
  RunOptions run;  // model, --input (the training set), params, engine, threads, sets, limit, seed
  std::string dev, test, out, log, plot, predict = "main";
  std::string epochs = "1", dev_limit;
  OptimizerOptions opt;
  bool quiet = false;
};

// The held-out set's figures into `row` (as NAME_loss, NAME_accuracy) and as a line of text; "" for
// an empty set.
std::string evaluate_into(Engine& engine, const HeldOut& h, const TrainOptions& t, nlohmann::json& row) {
  if (h.loss.empty()) return "";
  const Evaluation e = evaluate(engine, h, t.run.batch, t.run.entry, t.predict);
  row[h.name + "_loss"] = e.loss;
  std::string out = fmt::format("{} loss {:.4f}", h.name, e.loss);
  if (e.has_accuracy) {
    row[h.name + "_accuracy"] = e.accuracy;
    out += fmt::format(", {} accuracy {:.2f}% ({} instances)", h.name, 100 * e.accuracy, e.instances);
  }
  return out;
}

// A progress bar that redraws itself on a terminal, at most every 0.2 s.
struct ProgressBar {
  bool on;
  int epoch, epochs;
  size_t n;
  double drawn = -1;
  void operator()(size_t done, double loss, double seconds) {
    if (!on || (seconds - drawn < 0.2 && done < n)) return;
    drawn = seconds;
    const size_t width = 30, filled = n ? width * done / n : width;
    std::cerr << fmt::format("\repoch {}/{} [{}{}] {}/{} {:.1f} inst/s, loss {:.4f}", epoch, epochs,
                             std::string(filled, '#'), std::string(width - filled, '.'), done, n,
                             seconds > 0 ? double(done) / seconds : 0.0, loss)
              << std::flush;
  }
};

nlohmann::json epoch_row(int e, const EpochResult& r) {
  return {{"epoch", e},
          {"train_loss", r.mean_loss},
          {"seconds", r.seconds},
          {"backward_seconds", r.backward_seconds},
          {"update_seconds", r.update_seconds},
          {"peak_bytes", r.peak_bytes},
          {"instances_per_s", double(r.instances) / r.seconds}};
}

std::string epoch_line(int e, int epochs, const EpochResult& r) {
  return fmt::format(
      "epoch {}/{}: train loss {:.4f} ({} instances, {:.1f} s: backward {:.1f} s, updates {:.1f} s; {:.1f} inst/s{})",
      e, epochs, r.mean_loss, r.instances, r.seconds, r.backward_seconds, r.update_seconds,
      double(r.instances) / r.seconds,
      r.peak_bytes > 0 ? fmt::format("; peak memory {:.1f} MiB", double(r.peak_bytes) / (1 << 20)) : "");
}

int train(TrainOptions& t) {
  RunOptions& o = t.run;
  const int epochs = static_cast<int>(parse_number("--epochs", t.epochs, 1, 100000));
  const size_t dev_limit = t.dev_limit.empty() ? 0 : parse_number("--dev-limit", t.dev_limit, 1, kMaxCount);
  check_optimizer(t.opt);
  if (o.batch == 0) throw UserError("--batch: training needs batches of at least one instance");
  Prepared p = prepare(o);  // the training set, read for the loss entry
  loss_function(*p.module, o.entry);
  // Trained in place: the engine computes with the params the optimiser updates.
  auto params = std::make_shared<ParamStore>(make_params(*p.module, copy_tensors(*p.params), p.params->source));
  p.params = params;
  std::unique_ptr<Engine> engine = make_cli_engine(o, p);
  auto held = [&](const std::string& name, const std::string& spec, size_t limit) {
    return spec.empty() ? HeldOut{name, {}, {}, {}}
                        : read_held_out(*p.module, name, spec, o.vocab, o.entry, t.predict, limit);
  };
  const HeldOut dev = held("dev", t.dev, dev_limit), test = held("test", t.test, 0);

  nlohmann::json log{{"model", o.model},
                     {"engine", engine->name()},
                     {"train", o.input},
                     {"instances", p.inputs.size()},
                     {"batch", o.batch},
                     {"seed", o.seed},
                     {"optimizer", {{"kind", t.opt.kind}, {"lr", t.opt.lr}, {"momentum", t.opt.momentum},
                                    {"weight_decay", t.opt.weight_decay}, {"clip", t.opt.clip_norm},
                                    {"sparse_embeddings", t.opt.sparse_embeddings}}},
                     {"epochs", nlohmann::json::array()},
                     {"batch_losses", nlohmann::json::array()}};
  const OnError on_error = parse_on_error(o.on_error);
  Optimizer optimizer(t.opt, *params, thread_count(o.threads));
  std::mt19937_64 rng(o.seed);
  nlohmann::json start_row = nlohmann::json::object();
  if (!dev.loss.empty()) {
    std::cout << "before training: " << evaluate_into(*engine, dev, t, start_row) << "\n" << std::flush;
    log["before"] = start_row;
  }
  const bool bar = !t.quiet && isatty(2);
  for (int e = 1; e <= epochs; ++e) {
    ProgressBar progress{bar, e, epochs, p.inputs.size()};
    EpochResult r = train_epoch(*engine, optimizer, *params, p.inputs, o.batch, rng, o.entry, std::ref(progress),
                                on_error);
    if (bar) std::cerr << "\n";
    nlohmann::json row = epoch_row(e, r);
    for (double l : r.batch_losses) log["batch_losses"].push_back(l);
    std::string line = epoch_line(e, epochs, r);
    if (!r.skipped.empty()) {
      row["skipped"] = nlohmann::json::array();
      for (const InstanceFailure& f : r.skipped) {
        std::cerr << "skipped: " << f.message << "\n";
        row["skipped"].push_back(f.instance);
      }
      line += fmt::format(" ({} instances skipped)", r.skipped.size());
    }
    const std::string d = evaluate_into(*engine, dev, t, row);
    if (!d.empty()) line += "; " + d;
    if (!t.out.empty()) {
      write_checkpoint(*p.module, *params, t.out, {{"epoch", std::to_string(e)}, {"model", o.model}});
      line += "; wrote " + t.out;
    }
    std::cout << line << "\n" << std::flush;
    log["epochs"].push_back(row);
  }
  nlohmann::json test_row = nlohmann::json::object();
  const std::string te = evaluate_into(*engine, test, t, test_row);
  if (!te.empty()) {
    std::cout << "final: " << te << "\n";
    log["test"] = test_row;
  }
  if (!t.log.empty()) io::write_file(t.log, log.dump(1) + "\n");
  if (!t.plot.empty()) {
    if (t.log.empty()) throw UserError("--plot draws the --log file: give --log too");
    const std::string cmd = fmt::format("/usr/bin/python3 {} {} {}", io::shell_quote(std::string(ACROBAT_SOURCE_DIR) + "/scripts/plot_train.py"),
                                        io::shell_quote(t.log), io::shell_quote(t.plot));
    if (std::system(cmd.c_str()) != 0) std::cerr << "train: warning: the plot failed (" << cmd << ")\n";
  }
  return 0;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto t = std::make_shared<TrainOptions>();
  t->run.entry = "loss";
  t->run.batch = 25;
  auto numbers = std::make_shared<NumberArgs>();
  auto* cmd = app.add_subcommand(
      "train", "Train a model: batched gradients of its loss entry, an optimiser step per batch, the dev set "
               "after each epoch, a checkpoint, the test set at the end");
  cmd->add_option("model", t->run.model, "Model file (.acr)")->required();
  cmd->add_option("--input", t->run.input, "KIND:FILE, the training set (sst gives LabelledTree values)");
  cmd->add_option("--dev", t->dev, "KIND:FILE evaluated after each epoch (sst, sst-tokens: accuracy of the root's label)");
  cmd->add_option("--test", t->test, "KIND:FILE evaluated at the end");
  cmd->add_option("--vocab", t->run.vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  cmd->add_option("--params", t->run.params, "Initial parameters (safetensors); default: random from --seed");
  cmd->add_option("--seed", numbers->seed, "Seed of the initial parameters and of the order of the instances");
  cmd->add_option("--set", t->run.sets, kSetHelp)->delimiter(',');
  cmd->add_option("--limit", numbers->limit, "Train on the first N instances only");
  cmd->add_option("--dev-limit", t->dev_limit, "Evaluate the first N dev instances only");
  cmd->add_option("--epochs", t->epochs, "Epochs (default 1)");
  cmd->add_option("--batch", numbers->batch, "Instances per gradient step (default 25)");
  cmd->add_option("--loss", t->run.entry, "The loss function (default loss)");
  cmd->add_option("--predict", t->predict, "The function whose argmax is compared with the labels (default main)");
  cmd->add_option("--optimizer", t->opt.kind, "adam (default) or sgd");
  cmd->add_option("--lr", t->opt.lr, "Learning rate (default 1e-3)");
  cmd->add_option("--momentum", t->opt.momentum, "SGD momentum (default 0.9)");
  cmd->add_option("--weight-decay", t->opt.weight_decay, "L2 weight decay added to the gradient (default 0)");
  cmd->add_option("--clip", t->opt.clip_norm, "Clip the gradient to this global norm (default 0: none)");
  cmd->add_flag("--sparse-embeddings", t->opt.sparse_embeddings,
                "Lazy updates of tables (indexed params): a row takes a step only when its gradient is non-zero, "
                "as PyTorch's SparseAdam and DyNet's sparse updates (default: every row, as torch.optim.Adam and SGD)");
  add_engine_option(cmd, t->run.engine, "batched (default), aot or reference");
  cmd->add_option("--threads", numbers->threads, "Threads of the forward runs, 1 to 1024 (default: all cores)");
  cmd->add_option("--out", t->out, "Checkpoint (safetensors, the names --params reads) after each epoch");
  cmd->add_option("--log", t->log, "Write the losses and accuracies as JSON");
  cmd->add_option("--plot", t->plot, "Draw the --log curves as a PNG");
  cmd->add_option("--on-error", t->run.on_error,
                  "A training instance that fails: raise (default: training stops) or skip (reported, left out "
                  "of its step)")
      ->check(CLI::IsMember({"raise", "skip"}));
  cmd->add_flag("--quiet", t->quiet, "No progress bar");
  return {cmd, [t, numbers] {
            numbers->read(t->run);
            return train(*t);
          }};
}

}  // namespace acrobat::cli
