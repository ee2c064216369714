// The Python module `acrobat._acrobat` (pybind11): a compiled model with its parameters and an
// engine, instances from Python values, outputs as numpy arrays. python/acrobat/__init__.py is the
// interface users call; convert.h turns Python values and arguments into acrobat's.
//
// Params: the model owns its params. Arrays given as params are copied (as torch's
// load_state_dict copies), and `params` are read-only numpy views of the model's storage, so
// nothing but set_params and training changes them, and a matrix never differs from its copy
// prepared for GEMM. Outputs are numpy arrays over the engine's tensors (no copy; an output that
// lies in a param's memory is copied). A user error (UserError) is raised as acrobat.Error, a bug
// (InternalError) as acrobat.InternalError.
//
// Threads: a model runs one call at a time (its mutex). The rule of the lock: the GIL is released
// before the mutex is taken (Model::locked), and nothing under the mutex calls into Python, so a
// thread waiting for the model never holds the GIL the thread in it needs. A training epoch takes
// the mutex per step and calls its progress callback between steps, unlocked: the callback may run
// the model.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <type_traits>

#include "compiler/pipeline.h"
#include "convert.h"
#include "engines/inputs.h"
#include "engines/make_engine.h"
#include "engines/train.h"
#include "lang/frontend.h"
#include "support/surface.h"

namespace py = pybind11;
using namespace acrobat;
using namespace acrobat::python;

namespace {

// Instances read by acrobat's readers (Model.read_inputs) or a part of them: the CLI's instances
// exactly, and for sst: trees and sst-tokens: sentences the labels of their roots.
struct Instances {
  std::vector<Value> values;
  std::string entry;
  std::optional<std::vector<int>> labels;

  size_t index(int64_t i) const {
    const int64_t n = static_cast<int64_t>(values.size());
    if (i < -n || i >= n) throw py::index_error("instance " + std::to_string(i) + " of " + std::to_string(n));
    return static_cast<size_t>(i < 0 ? i + n : i);
  }
  Instances slice(const py::slice& s) const {
    size_t start = 0, stop = 0, step = 0, count = 0;
    if (!s.compute(values.size(), &start, &stop, &step, &count)) throw py::error_already_set();
    Instances out{{}, entry, labels ? std::optional<std::vector<int>>(std::vector<int>{}) : std::nullopt};
    for (size_t k = 0, i = start; k < count; ++k, i += step) {
      out.values.push_back(values[i]);
      if (labels) out.labels->push_back((*labels)[i]);
    }
    return out;
  }
};

constexpr TensorViews kInstanceViews{true, nullptr};  // instances share their tensors: read-only

class Model {
 public:
  // `source`: a path, or with `is_text` the model's text named `name` in messages.
  Model(const std::string& source, bool is_text, const std::string& name, const std::map<std::string, int64_t>& dims,
        const std::vector<std::string>& disable, const std::string& engine, int threads, const std::string& cache_dir,
        int64_t max_steps)
      : threads_(thread_count(threads)) {
    check_engine_name(engine);
    spec_.engine = engine;
    spec_.threads = threads_;
    spec_.cache_dir = cache_dir;
    spec_.max_steps = max_steps;
    CompileOptions o = compile_options({}, disable);  // the analyses switched off, as `--disable` reads them
    for (const auto& [k, v] : dims) o.dims[k] = v;
    module_ = is_text ? compile_checked(parse_model_text(name, source, o.dims), o) : compile_model(source, o);
    params_ = std::make_shared<ParamStore>(init_params(*module_, 0));
  }

  void params_from_seed(uint64_t seed) { set_params(std::make_shared<ParamStore>(init_params(*module_, seed))); }

  // The params of a file or a mapping; strict: every param given and nothing else (else the
  // params not given keep their values). Returns the params kept and the names that are not params.
  using Unmatched = std::pair<std::vector<std::string>, std::vector<std::string>>;
  Unmatched params_from_file(const std::string& path, bool strict) {
    Unmatched out;
    const auto current = store();
    set_params(std::make_shared<ParamStore>(load_params(*module_, path, &out.second, matching(strict, *current, out))));
    return out;
  }

  // Arrays by name, float32 and C-contiguous (the Python side makes them so): copied.
  Unmatched params_from_arrays(const py::dict& arrays, bool strict) {
    std::vector<py::array> keep;  // alive until copied
    std::map<std::string, ParamSource> sources;
    for (auto [k, v] : arrays) {
      auto a = py::array_t<float, py::array::c_style>::ensure(v);
      const std::string name = py::str(k).cast<std::string>();
      if (!a) throw UserError(argument("--params") + ": '" + name + "' is not a float32 C-contiguous array");
      sources[name] = {std::vector<int64_t>(a.shape(), a.shape() + a.ndim()), a.data()};
      keep.push_back(a);
    }
    Unmatched out;
    const auto current = store();
    set_params(std::make_shared<ParamStore>(
        params_from(*module_, sources, "the params given", &out.second, matching(strict, *current, out))));
    return out;
  }

  // Every param as a read-only numpy array over the params' storage, by name, in declaration order.
  py::dict param_arrays() {
    const auto params = store();
    py::dict out;
    for (size_t k = 0; k < module_->params.size(); ++k) {
      auto t = std::shared_ptr<const Tensor>(params, &params->params[k].tensor);
      out[py::str(module_->params[k].name)] = tensor_array(t, {true, nullptr});
    }
    return out;
  }

  std::string params_source() { return store()->source; }

  // The entry's instances from Python values (each as value_from_json reads it); errors name the
  // instance counting from `first` (a part of a larger collection: acrobat.dask).
  // `items` as values of the entry's input type; an item that is not one is an error naming it
  // (first + its index), or, given `unreadable`, recorded there (by its index in `items`) and left
  // out, `positions` getting each value's index in `items`.
  std::vector<Value> instances(const py::handle& items, const std::string& entry, size_t first = 0,
                               std::vector<InstanceFailure>* unreadable = nullptr,
                               std::vector<size_t>* positions = nullptr) const {
    if (py::isinstance<Instances>(items)) {
      const Instances& in = items.cast<const Instances&>();
      if (in.entry != entry)
        throw UserError("the instances were read for entry '" + in.entry + "', not '" + entry + "'");
      return in.values;
    }
    const Type& type = input_type(entry);
    std::vector<Value> out;
    SizeNamesScope names(module_->plan->size_names);
    size_t i = 0;
    for (py::handle item : items) {
      try {
        out.push_back(value_from_json(to_json(item), type, SourceLoc{}));
        if (positions) positions->push_back(i);
      } catch (const UserError& e) {
        if (!unreadable) throw for_instance(e, first + i);
        unreadable->push_back({i, for_instance(e, first + i).what()});
      }
      ++i;
    }
    return out;
  }

  Instances read_inputs(const std::string& spec, const std::string& entry, const std::string& vocab, size_t limit) const {
    SizeNamesScope names(module_->plan->size_names);
    const InputSpec input = parse_input_spec(spec);
    Instances out{load_inputs(input, input_type(entry), vocab_path(input, vocab), limit), entry, std::nullopt};
    if (has_root_labels(input)) out.labels = sst_root_labels(input, out.values.size());
    return out;
  }

  // The same instances as JSON text (one array), for Python values that pickle (acrobat.dask).
  std::string read_values(const std::string& spec, const std::string& entry, const std::string& vocab, size_t limit) const {
    const Type& type = input_type(entry);
    SizeNamesScope names(module_->plan->size_names);
    nlohmann::json out = nlohmann::json::array();
    for (const Value& v : read_inputs(spec, entry, vocab, limit).values) out.push_back(value_to_json(v, type));
    return out.dump();
  }

  // Outputs (None for an instance skipped) and stats; with on_error "skip", stats["failures"] lists
  // the instances skipped as {"instance": its index in the collection, "error": the message}.
  py::tuple run(const py::handle& items, size_t batch, const std::string& entry, size_t first,
                const std::string& on_error) {
    const OnError mode = parse_on_error(on_error);
    // With "skip", items that are no instance of the entry's type are left out as those that fail.
    std::vector<InstanceFailure> failed;
    std::vector<size_t> positions;  // of the inputs in `items`
    std::vector<Value> inputs = mode == OnError::Skip ? instances(items, entry, first, &failed, &positions)
                                                      : instances(items, entry, first);
    if (mode == OnError::Raise)
      for (size_t i = 0; i < inputs.size(); ++i) positions.push_back(i);
    std::vector<size_t> numbers;  // errors name an instance by its index in the collection
    for (size_t p : positions) numbers.push_back(first + p);
    std::shared_ptr<const ParamStore> params;
    RunResult r = locked([&] {
      params = params_;
      return run_batches(engine(), inputs, spec_.engine == "reference" ? 0 : batch, entry, mode, numbers);
    });
    for (InstanceFailure& f : r.failures) failed.push_back({positions[f.instance], std::move(f.message)});
    std::sort(failed.begin(), failed.end(),
              [](const InstanceFailure& a, const InstanceFailure& b) { return a.instance < b.instance; });
    const size_t n = inputs.size() + (mode == OnError::Skip ? failed.size() - r.failures.size() : 0);
    std::vector<py::object> out(n, py::none());
    std::vector<uint8_t> skipped(n, 0);
    py::list failures;
    for (const InstanceFailure& f : failed) {
      skipped[f.instance] = 1;
      py::dict d;
      d["instance"] = first + f.instance;
      d["error"] = f.message;
      failures.append(d);
    }
    for (size_t k = 0; k < inputs.size(); ++k)
      if (!skipped[positions[k]]) out[positions[k]] = to_python(r.outputs[k], {false, params.get()});
    py::list outputs;
    for (py::object& o : out) outputs.append(std::move(o));
    py::dict stats = stats_dict(r.stats);
    if (mode == OnError::Skip) stats["failures"] = failures;
    return py::make_tuple(outputs, stats);
  }

  // (losses, grads by param name, stats); with `wrt_inputs` (losses, grads, input grads, stats), the
  // input grads one per instance in its shape (gradient_structure).
  py::tuple gradients(const py::handle& items, const std::string& entry, bool wrt_inputs) {
    loss_function(*module_, entry);
    std::vector<Value> inputs = instances(items, entry);
    const GradWrt wrt = wrt_inputs ? GradWrt::ParamsAndInputs : GradWrt::Params;
    GradResult g = locked([&] { return engine().gradients(inputs, entry, 0, {}, wrt); });
    py::list losses;
    for (const Value& v : g.outputs) losses.append(v.tensor->data[0]);
    py::dict grads;
    for (size_t k = 0; k < g.grads.size(); ++k)
      if (!module_->params[k].frozen)  // training leaves a frozen param: it has no gradient
        grads[py::str(module_->params[k].name)] = tensor_array(std::make_shared<Tensor>(std::move(g.grads[k])), {});
    if (!wrt_inputs) return py::make_tuple(losses, grads, stats_dict(g.stats));
    py::list input_grads;
    for (size_t i = 0; i < inputs.size(); ++i) input_grads.append(gradient_structure(inputs[i], g.input_grads[i]));
    return py::make_tuple(losses, grads, input_grads, stats_dict(g.stats));
  }

  std::string engine_name() {
    return locked([&] { return std::string(engine().name()); });
  }

  // The current params as a checkpoint (safetensors under the params' names, as --params reads).
  void save(const std::string& path) {
    locked([&] { write_checkpoint(*module_, *params_, path); });
  }

  // The share of `items` whose `entry` output has its largest score at its label (`labels`, or
  // the labels of Instances read from sst: trees or sst-tokens: sentences).
  double accuracy(const py::handle& items, const std::optional<std::vector<int>>& labels, const std::string& entry,
                  size_t batch) {
    std::vector<Value> inputs = instances(items, entry);
    std::vector<int> given_labels;
    if (labels) {
      given_labels = *labels;
    } else if (py::isinstance<Instances>(items) && items.cast<const Instances&>().labels) {
      given_labels = *items.cast<const Instances&>().labels;
    } else {
      throw UserError("labels: none given, and the instances carry none (only sst: trees read by read_inputs do)");
    }
    return locked([&] { return acrobat::accuracy(engine(), inputs, given_labels, entry, batch); });
  }

  // A held-out set read from `spec` and evaluated as `acrobat train` evaluates its dev and test sets
  // (engines/train.h): {"loss": mean loss, "accuracy": share right (SST trees only), "instances"}.
  py::dict evaluate(const std::string& spec, const std::string& loss, const std::string& predict,
                    const std::string& vocab, size_t limit, size_t batch) {
    loss_function(*module_, loss);
    const HeldOut held = read_held_out(*module_, "held-out", spec, vocab, loss, predict, limit);
    const Evaluation e = locked([&] { return acrobat::evaluate(engine(), held, batch, loss, predict); });
    py::dict d;
    d["loss"] = e.loss;
    d["instances"] = held.loss.size();
    if (e.has_accuracy) d["accuracy"] = e.accuracy;
    return d;
  }

  std::vector<std::string> param_names() const {
    std::vector<std::string> out;
    for (const auto& p : module_->params) out.push_back(p.name);
    return out;
  }

 private:
  friend class Trainer;

  // `fn()` with the model's mutex held and the GIL released: the one way into the model's state
  // (params_, engine_). `fn` must not touch Python objects.
  template <class F>
  std::invoke_result_t<F&> locked(F&& fn) {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return fn();
  }

  std::shared_ptr<ParamStore> store() {
    return locked([&] { return params_; });
  }

  static ParamMatching matching(bool strict, const ParamStore& current, Unmatched& out) {
    ParamMatching m;
    m.unknown_is_error = strict;
    if (!strict) m.keep = &current;
    m.kept = &out.first;
    return m;
  }

  const Type& input_type(const std::string& entry) const {
    check_entry(*module_->source, entry);
    const ir::Function& f = module_->functions[entry_function(*module_, entry)];
    return f.vars[f.params[0]].type;
  }

  void set_params(std::shared_ptr<ParamStore> params) {
    locked([&] {
      engine_.reset();  // built on the old params
      params_ = std::move(params);
    });
  }

  Engine& engine() {
    if (!engine_) engine_ = make_engine(spec_, module_, params_);
    return *engine_;
  }

  std::shared_ptr<const ir::Module> module_;
  EngineSpec spec_;
  int threads_;
  std::shared_ptr<ParamStore> params_;  // before engine_: destroyed after it
  std::unique_ptr<Engine> engine_;      // made when first needed, on params_
  std::mutex mutex_;                    // one call in the model at a time
};

// Training a Model in place: an optimiser's state and the order's random stream (one per trainer,
// as `acrobat train` keeps one across its epochs), steps with the engine's batched gradients.
class Trainer {
 public:
  Trainer(Model& model, const OptimizerOptions& options, uint64_t seed, const std::string& entry)
      : model_(model), rng_(seed), entry_(entry) {
    check_optimizer(options);
    loss_function(*model_.module_, entry);
    model_.locked([&] {
      optimizer_ = std::make_unique<Optimizer>(options, *model_.params_, model_.threads_);
      params_at_start_ = model_.params_;
    });
  }

  // One gradient of the batch's mean loss and one update; the mean loss.
  double step(const py::handle& items) {
    std::vector<Value> inputs = model_.instances(items, entry_);
    if (inputs.empty()) throw UserError("a training step needs at least one instance");
    return model_.locked([&] {
      check_params();
      return train_step(model_.engine(), *optimizer_, *model_.params_, inputs, entry_).loss_sum /
             double(inputs.size());
    });
  }

  // One epoch as `acrobat train` runs it: the instances in this trainer's random order, `batch` a
  // step. `progress(done, mean_loss, seconds)` after each step, if given, with the model unlocked.
  py::dict epoch(const py::handle& items, size_t batch, const py::object& progress, const std::string& on_error) {
    const OnError mode = parse_on_error(on_error);
    std::vector<Value> inputs = model_.instances(items, entry_);
    Epoch epoch(inputs.size(), batch, rng_, mode);
    while (!epoch.done()) {
      const EpochResult r = model_.locked([&] {
        check_params();
        return epoch.step(model_.engine(), *optimizer_, *model_.params_, inputs, entry_);
      });
      if (!progress.is_none()) progress(epoch.position(), r.mean_loss, r.seconds);
    }
    const EpochResult& r = epoch.result();
    py::dict d;
    d["mean_loss"] = r.mean_loss;
    d["instances"] = r.instances;
    d["seconds"] = r.seconds;
    d["backward_seconds"] = r.backward_seconds;
    d["update_seconds"] = r.update_seconds;
    d["peak_bytes"] = r.peak_bytes;
    d["batch_losses"] = r.batch_losses;
    if (mode == OnError::Skip) {
      py::list skipped;
      for (const InstanceFailure& f : r.skipped) {
        py::dict s;
        s["instance"] = f.instance;
        s["error"] = f.message;
        skipped.append(s);
      }
      d["skipped"] = skipped;
    }
    return d;
  }

  int64_t steps() const { return optimizer_->steps(); }

 private:
  // Params replaced since this trainer was made (Model.set_params) have no optimiser state.
  void check_params() const {
    if (params_at_start_.lock() != model_.params_)
      throw UserError("the model's params were replaced after this trainer was made: make a new trainer");
  }

  Model& model_;
  std::mt19937_64 rng_;
  std::string entry_;
  std::unique_ptr<Optimizer> optimizer_;
  std::weak_ptr<ParamStore> params_at_start_;  // weak: a store made later at the same address is not it
};

void bind_instances(py::module_& m) {
  py::class_<Instances>(m, "Instances")
      .def("__len__", [](const Instances& i) { return i.values.size(); })
      .def("__getitem__", [](const Instances& in, int64_t i) { return to_python(in.values[in.index(i)], kInstanceViews); })
      .def("__getitem__", &Instances::slice)
      .def("__iter__",
           [](const Instances& in) {
             py::list all;
             for (const Value& v : in.values) all.append(to_python(v, kInstanceViews));
             return py::iter(all);
           })
      .def_property_readonly("entry", [](const Instances& i) { return i.entry; })
      .def_property_readonly("labels", [](const Instances& i) { return i.labels; });
}

// The arguments' checks (convert.h), for python/acrobat/__init__.py.
void bind_arguments(py::module_& m) {
  m.def("integer_argument", &integer_argument);
  m.def("seed_argument", &seed_argument);
  m.def("real_argument", &real_argument);
  m.def("text_argument", &text_argument);
  m.def("dims_argument", &dims_argument);
  m.attr("MAX_THREADS") = kMaxThreads;
  m.attr("MAX_STEPS") = kMaxSteps;
  m.attr("MAX_BATCH") = kMaxBatch;
  m.attr("MAX_COUNT") = kMaxCount;
}

}  // namespace

PYBIND11_MODULE(_acrobat, m) {
  set_surface(Surface::Python);  // messages name arguments as Python's keywords
  m.doc() = "acrobat: an auto-batching compiler and runtime for dynamic models (the native part)";
  m.attr("__version__") = ACROBAT_VERSION;
  py::register_exception<UserError>(m, "Error", PyExc_ValueError);
  py::register_exception<InternalError>(m, "InternalError", PyExc_RuntimeError);
  bind_instances(m);
  bind_arguments(m);
  py::class_<Model>(m, "Model")
      .def(py::init<const std::string&, bool, const std::string&, const std::map<std::string, int64_t>&,
                    const std::vector<std::string>&, const std::string&, int, const std::string&, int64_t>(),
           py::arg("source"), py::arg("is_text"), py::arg("name"), py::arg("dims"), py::arg("disable"),
           py::arg("engine"), py::arg("threads"), py::arg("cache_dir"), py::arg("max_steps"))
      .def("params_from_seed", &Model::params_from_seed)
      .def("params_from_file", &Model::params_from_file)
      .def("params_from_arrays", &Model::params_from_arrays)
      .def("param_arrays", &Model::param_arrays)
      .def("param_names", &Model::param_names)
      .def_property_readonly("params_source", &Model::params_source)
      .def_property_readonly("engine_name", &Model::engine_name)
      .def("read_inputs", &Model::read_inputs)
      .def("read_values", &Model::read_values)
      .def("run", &Model::run)
      .def("gradients", &Model::gradients)
      .def("save", &Model::save)
      .def("accuracy", &Model::accuracy)
      .def("evaluate", &Model::evaluate);
  py::class_<OptimizerOptions>(m, "OptimizerOptions")
      .def(py::init<>())
      .def_readwrite("kind", &OptimizerOptions::kind)
      .def_readwrite("lr", &OptimizerOptions::lr)
      .def_readwrite("momentum", &OptimizerOptions::momentum)
      .def_readwrite("beta1", &OptimizerOptions::beta1)
      .def_readwrite("beta2", &OptimizerOptions::beta2)
      .def_readwrite("eps", &OptimizerOptions::eps)
      .def_readwrite("weight_decay", &OptimizerOptions::weight_decay)
      .def_readwrite("clip_norm", &OptimizerOptions::clip_norm)
      .def_readwrite("sparse_embeddings", &OptimizerOptions::sparse_embeddings);
  py::class_<Trainer>(m, "Trainer")
      .def(py::init<Model&, const OptimizerOptions&, uint64_t, const std::string&>(), py::keep_alive<1, 2>())
      .def("step", &Trainer::step)
      .def("epoch", &Trainer::epoch)
      .def_property_readonly("steps", &Trainer::steps);
}
