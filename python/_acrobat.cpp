// The Python module `acrobat._acrobat` (pybind11): a compiled model with its parameters and an
// engine, instances from Python values, outputs as numpy arrays. python/acrobat/__init__.py is the
// interface users call; it converts torch tensors to numpy before they reach this module.
//
// Memory: params given as float32 C-contiguous arrays are used in place (ParamStore borrows them;
// the arrays are kept alive with the store); output tensors are handed over as numpy arrays over
// the engine's tensors (no copy); a user error (UserError: "file:line:col: error: ...") is raised
// as acrobat.Error. The engine runs with the GIL released. Training (Trainer) updates params the
// model owns: borrowed arrays are copied when a trainer is made, so a caller's arrays never change.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>

#include <nlohmann/json.hpp>

#include "compiler/pipeline.h"
#include "engines/inputs.h"
#include "engines/make_engine.h"
#include "engines/train.h"
#include "io/files.h"
#include "lang/frontend.h"

namespace py = pybind11;
using namespace acrobat;

namespace {

// Params and the Python arrays whose memory they borrow: shared by the model and by every numpy
// view of them, so that a view outlives neither.
struct HeldParams {
  std::vector<py::object> arrays;
  std::shared_ptr<ParamStore> store;
};

// Instances read by acrobat's own readers (Model.read_inputs): the CLI's instances exactly.
struct Instances {
  std::vector<Value> values;
  std::string entry;
};

// A Python value as JSON, in the encoding of value_from_json (engines/inputs.h): numbers, bools,
// strings, lists and tuples as arrays, dicts as objects, a numpy array or a torch tensor as
// {"shape", "data"}. The walk recurses in C++, bounded as the files' readers bound nesting, so that
// a deep instance is an acrobat.Error rather than Python's recursion limit.
nlohmann::json to_json(py::handle h, int depth = 0) {
  if (depth > static_cast<int>(io::kMaxJsonDepth))  // as the input files' readers bound it
    throw UserError("an instance nested more than " + std::to_string(io::kMaxJsonDepth) + " levels deep");
  if (h.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(h)) return h.cast<bool>();
  if (py::isinstance<py::int_>(h)) {
    try {
      return h.cast<int64_t>();
    } catch (const py::cast_error&) {
      throw UserError("an int out of the 64-bit range in an instance");
    }
  }
  if (py::isinstance<py::float_>(h)) return h.cast<double>();
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  if (py::hasattr(h, "detach") && py::hasattr(h, "numpy"))  // a torch tensor
    return to_json(h.attr("detach")().attr("cpu")().attr("numpy")(), depth + 1);
  if (py::isinstance<py::array>(h)) {
    auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(h);
    if (!a) throw UserError("an array that cannot be read as float32");
    nlohmann::json shape = nlohmann::json::array();
    for (py::ssize_t d = 0; d < a.ndim(); ++d) shape.push_back(a.shape(d));
    return {{"shape", shape}, {"data", std::vector<float>(a.data(), a.data() + a.size())}};
  }
  if (py::isinstance<py::dict>(h)) {
    nlohmann::json out = nlohmann::json::object();
    for (auto [k, v] : h.cast<py::dict>()) out[py::str(k).cast<std::string>()] = to_json(v, depth + 1);
    return out;
  }
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    nlohmann::json out = nlohmann::json::array();
    for (py::handle v : h) out.push_back(to_json(v, depth + 1));
    return out;
  }
  if (py::hasattr(h, "item") && py::hasattr(h, "dtype")) return to_json(h.attr("item")(), depth + 1);  // a numpy scalar
  throw UserError("an instance holds a " + py::str(py::type::of(h).attr("__name__")).cast<std::string>() +
                  " (expected numbers, bools, strings, lists, tuples, dicts or numpy arrays)");
}

// A value as Python: a tensor as a numpy array over its storage, ints, floats and bools as such, a
// tuple as a tuple, a List as a list, another data-type value as {"Ctor": [fields]} (or "Ctor"
// with no fields), as value_to_json writes them.
py::object to_python(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Unit: return py::none();
    case Value::Kind::Int: return py::int_(v.i);
    case Value::Kind::Float: return py::float_(v.f);
    case Value::Kind::Bool: return py::bool_(v.b);
    case Value::Kind::Tensor: {
      auto keep = new std::shared_ptr<const Tensor>(v.tensor);
      py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<const Tensor>*>(p); });
      return py::array_t<float>(v.tensor->shape, v.tensor->data.get(), owner);
    }
    case Value::Kind::Tuple: {
      py::tuple t(v.agg->fields.size());
      for (size_t i = 0; i < v.agg->fields.size(); ++i) t[i] = to_python(v.agg->fields[i]);
      return t;
    }
    case Value::Kind::Adt: {
      const std::string& name = v.agg->ctor->name;
      if (name == "Nil" || name == "Cons") {
        py::list l;
        for (const Value* c = &v; c->agg->ctor->name == "Cons"; c = &c->agg->fields[1]) l.append(to_python(c->agg->fields[0]));
        return l;
      }
      if (v.agg->fields.empty()) return py::str(name);
      py::list fields;
      for (const Value& f : v.agg->fields) fields.append(to_python(f));
      py::dict d;
      d[py::str(name)] = fields;
      return d;
    }
    default: throw UserError("an output that is a function or a pending tensor cannot be returned");
  }
}

py::dict stats_dict(const RunStats& s) {
  py::dict d;
  d["instances"] = s.instances;
  d["wall_seconds"] = s.wall_seconds;
  d["instances_per_second"] = s.instances_per_second();
  d["useful_gflops"] = s.useful_gflops();
  d["kernel_calls"] = s.kernel_calls;
  d["nodes"] = s.nodes;
  d["shared_nodes"] = s.shared_nodes;
  d["batches"] = s.batches;
  d["mean_batch_size"] = s.mean_batch_size();
  d["peak_bytes"] = s.peak_bytes;
  d["host_seconds"] = s.host_seconds;
  d["kernel_seconds"] = s.kernel_seconds;
  d["backward_seconds"] = s.backward_seconds;
  return d;
}

class Model {
 public:
  // `source`: a path, or with `is_text` the model's text named `name` in messages.
  Model(const std::string& source, bool is_text, const std::string& name, const std::map<std::string, int64_t>& dims,
        const std::vector<std::string>& disable, const std::string& engine, int threads, const std::string& cache_dir)
      : threads_(thread_count(threads)) {
    check_engine_name(engine);
    spec_.engine = engine;
    spec_.threads = threads_;
    spec_.cache_dir = cache_dir;
    CompileOptions o = compile_options({}, disable);  // the analyses switched off, as `--disable` reads them
    for (const auto& [k, v] : dims) o.dims[k] = v;
    module_ = is_text ? compile_checked(parse_model_text(name, source, o.dims), o) : compile_model(source, o);
    params_.store = std::make_shared<ParamStore>(init_params(*module_, 0));
  }

  void params_from_seed(uint64_t seed) { set_params({{}, std::make_shared<ParamStore>(init_params(*module_, seed))}); }

  std::vector<std::string> params_from_file(const std::string& path) {
    std::vector<std::string> unused;
    set_params({{}, std::make_shared<ParamStore>(load_params(*module_, path, &unused))});
    return unused;
  }

  // Arrays by name, float32 and C-contiguous (the Python side makes them so): used in place.
  std::vector<std::string> params_from_arrays(const py::dict& arrays, const std::string& where) {
    HeldParams held;
    std::map<std::string, ParamSource> sources;
    for (auto [k, v] : arrays) {
      auto a = py::array_t<float, py::array::c_style>::ensure(v);
      const std::string name = py::str(k).cast<std::string>();
      if (!a) throw UserError(where + ": '" + name + "' is not a float32 C-contiguous array");
      sources[name] = {std::vector<int64_t>(a.shape(), a.shape() + a.ndim()), a.data()};
      held.arrays.push_back(a);
    }
    std::vector<std::string> unused;
    held.store = std::make_shared<ParamStore>(params_from(*module_, sources, where, true, &unused));
    set_params(std::move(held));
    return unused;
  }

  // Every param as a numpy array over the params' storage, by name, in declaration order.
  py::dict param_arrays() const {
    py::dict out;
    auto keep = new HeldParams(params_);
    py::capsule owner(keep, [](void* p) { delete static_cast<HeldParams*>(p); });
    for (size_t k = 0; k < module_->params.size(); ++k) {
      const Tensor& t = params_.store->params[k].tensor;
      out[py::str(module_->params[k].name)] = py::array_t<float>(t.shape, t.data.get(), owner);
    }
    return out;
  }

  std::string params_source() const { return params_.store->source; }

  // The entry's instances from Python values (each as value_from_json reads it).
  std::vector<Value> instances(const py::handle& items, const std::string& entry) const {
    if (py::isinstance<Instances>(items)) {
      const Instances& in = items.cast<const Instances&>();
      if (in.entry != entry)
        throw UserError("the instances were read for entry '" + in.entry + "', not '" + entry + "'");
      return in.values;
    }
    const Type& type = input_type(entry);
    std::vector<Value> out;
    size_t i = 0;
    for (py::handle item : items) {
      ++i;
      SizeNamesScope names(module_->plan->size_names);
      out.push_back(value_from_json(to_json(item), type, SourceLoc{"instance " + std::to_string(i), 1, 1}));
    }
    return out;
  }

  Instances read_inputs(const std::string& spec, const std::string& entry, const std::string& vocab, size_t limit) const {
    SizeNamesScope names(module_->plan->size_names);
    const InputSpec input = parse_input_spec(spec);
    return {load_inputs(input, input_type(entry), vocab_path(input, vocab), limit), entry};
  }

  // The same instances as JSON text (one array), for Python values that pickle (acrobat.dask).
  std::string read_values(const std::string& spec, const std::string& entry, const std::string& vocab, size_t limit) const {
    const Type& type = input_type(entry);
    SizeNamesScope names(module_->plan->size_names);
    nlohmann::json out = nlohmann::json::array();
    for (const Value& v : read_inputs(spec, entry, vocab, limit).values) out.push_back(value_to_json(v, type));
    return out.dump();
  }

  py::tuple run(const py::handle& items, size_t batch, const std::string& entry) {
    std::vector<Value> inputs = instances(items, entry);
    RunResult r;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      r = engine().run_batches(inputs, spec_.engine == "reference" ? 0 : batch, entry);
    }
    py::list outputs;
    for (const Value& v : r.outputs) outputs.append(to_python(v));
    return py::make_tuple(outputs, stats_dict(r.stats));
  }

  py::tuple gradients(const py::handle& items, const std::string& entry) {
    loss_function(*module_, entry);
    std::vector<Value> inputs = instances(items, entry);
    GradResult g;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      g = engine().gradients(inputs, entry);
    }
    py::list losses;
    for (const Value& v : g.outputs) losses.append(v.tensor->data[0]);
    py::dict grads;
    for (size_t k = 0; k < g.grads.size(); ++k) {
      auto t = std::make_shared<Tensor>(std::move(g.grads[k]));
      auto keep = new std::shared_ptr<Tensor>(t);
      py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Tensor>*>(p); });
      grads[py::str(module_->params[k].name)] = py::array_t<float>(t->shape, t->data.get(), owner);
    }
    return py::make_tuple(losses, grads, stats_dict(g.stats));
  }

  std::string engine_name() {
    std::lock_guard<std::mutex> lock(mutex_);
    return engine().name();
  }

  // The current params as a checkpoint (safetensors under the params' names, as --params reads).
  void save(const std::string& path) const { write_checkpoint(*module_, *params_.store, path); }

  // The share of `items` whose `entry` output has its largest score at labels[i].
  double accuracy(const py::handle& items, const std::vector<int>& labels, const std::string& entry, size_t batch) {
    std::vector<Value> inputs = instances(items, entry);
    if (inputs.size() != labels.size())
      throw UserError(std::to_string(inputs.size()) + " instances but " + std::to_string(labels.size()) + " labels");
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return acrobat::accuracy(engine(), inputs, labels, entry, batch);
  }
  // A held-out set read from `spec` and evaluated as `acrobat train` evaluates its dev and test sets
  // (engines/train.h): {"loss": mean loss, "accuracy": share right (SST trees only), "instances"}.
  py::dict evaluate(const std::string& spec, const std::string& loss, const std::string& predict,
                    const std::string& vocab, size_t limit, size_t batch) {
    loss_function(*module_, loss);
    const HeldOut held = read_held_out(*module_, "held-out", spec, vocab, loss, predict, limit);
    Evaluation e;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      e = acrobat::evaluate(engine(), held, batch, loss, predict);
    }
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

  const Type& input_type(const std::string& entry) const {
    check_entry(*module_->source, entry);
    const ir::Function& f = module_->functions[entry_function(*module_, entry)];
    return f.vars[f.params[0]].type;
  }

  void set_params(HeldParams held) {
    std::lock_guard<std::mutex> lock(mutex_);
    engine_.reset();  // built on the old params
    params_ = std::move(held);
  }

  Engine& engine() {
    if (!engine_) engine_ = make_engine(spec_, module_, params_.store);
    return *engine_;
  }

  std::shared_ptr<const ir::Module> module_;
  EngineSpec spec_;
  int threads_;
  HeldParams params_;               // before engine_: destroyed after it
  std::unique_ptr<Engine> engine_;  // made when first needed, on params_
  std::mutex mutex_;                // one run at a time (runs release the GIL)
};

// Training a Model in place: an optimiser's state and the order's random stream (one per trainer,
// as `acrobat train` keeps one across its epochs), steps with the engine's batched gradients.
class Trainer {
 public:
  Trainer(Model& model, const OptimizerOptions& options, uint64_t seed, const std::string& entry)
      : model_(model), rng_(seed), entry_(entry) {
    check_optimizer(options);
    loss_function(*model_.module_, entry);
    std::lock_guard<std::mutex> lock(model_.mutex_);
    if (!model_.params_.arrays.empty()) {  // borrowed from the caller: train a copy
      auto& store = *model_.params_.store;
      model_.engine_.reset();
      model_.params_ = {{}, std::make_shared<ParamStore>(make_params(*model_.module_, copy_tensors(store), store.source))};
    }
    optimizer_ = std::make_unique<Optimizer>(options, *model_.params_.store, model_.threads_);
    params_at_start_ = model_.params_.store;
  }

  // One gradient of the batch's mean loss and one update; the mean loss.
  double step(const py::handle& items) {
    std::vector<Value> inputs = model_.instances(items, entry_);
    if (inputs.empty()) throw UserError("a training step needs at least one instance");
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(model_.mutex_);
    check_params();
    return train_step(model_.engine(), *optimizer_, *model_.params_.store, inputs, entry_).loss_sum /
           double(inputs.size());
  }

  // One epoch as `acrobat train` runs it: the instances in this trainer's random order, `batch` a
  // step. `progress(done, mean_loss, seconds)` after each step, if given.
  py::dict epoch(const py::handle& items, size_t batch, const py::object& progress) {
    if (batch == 0) throw UserError("batch: training needs batches of at least one instance");
    std::vector<Value> inputs = model_.instances(items, entry_);
    std::function<void(size_t, double, double)> report;
    if (!progress.is_none())
      report = [&](size_t done, double loss, double seconds) {
        py::gil_scoped_acquire gil;
        progress(done, loss, seconds);
      };
    EpochResult r;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(model_.mutex_);
      check_params();
      r = train_epoch(model_.engine(), *optimizer_, *model_.params_.store, inputs, batch, rng_, entry_, report);
    }
    py::dict d;
    d["mean_loss"] = r.mean_loss;
    d["instances"] = r.instances;
    d["seconds"] = r.seconds;
    d["backward_seconds"] = r.backward_seconds;
    d["update_seconds"] = r.update_seconds;
    d["peak_bytes"] = r.peak_bytes;
    d["batch_losses"] = r.batch_losses;
    return d;
  }

  int64_t steps() const { return optimizer_->steps(); }

 private:
  // Params replaced since this trainer was made (Model.set_params) have no optimiser state.
  void check_params() const {
    if (params_at_start_.lock() != model_.params_.store)
      throw UserError("the model's params were replaced after this trainer was made: make a new trainer");
  }

  Model& model_;
  std::mt19937_64 rng_;
  std::string entry_;
  std::unique_ptr<Optimizer> optimizer_;
  std::weak_ptr<ParamStore> params_at_start_;  // weak: a store made later at the same address is not it
};

}  // namespace

PYBIND11_MODULE(_acrobat, m) {
  m.doc() = "acrobat: an auto-batching compiler and runtime for dynamic models (the native part)";
  py::register_exception<UserError>(m, "Error", PyExc_ValueError);
  py::register_exception<InternalError>(m, "InternalError", PyExc_RuntimeError);
  py::class_<Instances>(m, "Instances")
      .def("__len__", [](const Instances& i) { return i.values.size(); })
      .def_property_readonly("entry", [](const Instances& i) { return i.entry; });
  py::class_<Model>(m, "Model")
      .def(py::init<const std::string&, bool, const std::string&, const std::map<std::string, int64_t>&,
                    const std::vector<std::string>&, const std::string&, int, const std::string&>(),
           py::arg("source"), py::arg("is_text"), py::arg("name"), py::arg("dims"), py::arg("disable"),
           py::arg("engine"), py::arg("threads"), py::arg("cache_dir"))
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
      .def_readwrite("clip_norm", &OptimizerOptions::clip_norm);
  py::class_<Trainer>(m, "Trainer")
      .def(py::init<Model&, const OptimizerOptions&, uint64_t, const std::string&>(), py::keep_alive<1, 2>())
      .def("step", &Trainer::step)
      .def("epoch", &Trainer::epoch)
      .def_property_readonly("steps", &Trainer::steps);
}
