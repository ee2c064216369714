#include "convert.h"

#include "io/files.h"
#include "support/diagnostics.h"
#include "support/surface.h"

namespace acrobat::python {

nlohmann::json to_json(py::handle h, int depth) {
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

namespace {

bool inside_params(const Tensor& t, const ParamStore& params) {
  const float* p = t.data.get();
  for (const ParamValue& v : params.params) {
    const float* begin = v.tensor.data.get();
    if (p >= begin && p < begin + v.tensor.size()) return true;
  }
  return false;
}

}  // namespace

py::array tensor_array(const std::shared_ptr<const Tensor>& t, const TensorViews& views) {
  if (views.params && inside_params(*t, *views.params))  // never a writable view of a param
    return py::array_t<float>(t->shape, t->data.get());     // (no owner: numpy copies)
  auto keep = new std::shared_ptr<const Tensor>(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<const Tensor>*>(p); });
  py::array a = py::array_t<float>(t->shape, t->data.get(), owner);
  if (views.read_only) a.attr("setflags")(py::arg("write") = false);
  return a;
}

namespace {

// A value's Python form with `leaf(v)` for each value that is no tuple or data type: tuples as
// tuples, lists as lists, a data type as {"Ctor": [fields]} (or `nullary(name)` without fields).
template <class Leaf, class Nullary>
py::object python_structure(const Value& v, Leaf&& leaf, Nullary&& nullary) {
  auto walk = [&](const Value& x) { return python_structure(x, leaf, nullary); };
  if (v.kind == Value::Kind::Tuple) {
    py::tuple t(v.agg->fields.size());
    for (size_t i = 0; i < v.agg->fields.size(); ++i) t[i] = walk(v.agg->fields[i]);
    return t;
  }
  if (v.kind != Value::Kind::Adt) return leaf(v);
  const std::string& name = v.agg->ctor->name;
  if (name == "Nil" || name == "Cons") {
    py::list l;
    for (const Value* c = &v; c->agg->ctor->name == "Cons"; c = &c->agg->fields[1]) l.append(walk(c->agg->fields[0]));
    return l;
  }
  if (v.agg->fields.empty()) return nullary(name);
  py::list fields;
  for (const Value& f : v.agg->fields) fields.append(walk(f));
  py::dict d;
  d[py::str(name)] = fields;
  return d;
}

}  // namespace

py::object to_python(const Value& v, const TensorViews& views) {
  return python_structure(
      v,
      [&](const Value& x) -> py::object {
        switch (x.kind) {
          case Value::Kind::Unit: return py::none();
          case Value::Kind::Int: return py::int_(x.i);
          case Value::Kind::Float: return py::float_(x.f);
          case Value::Kind::Bool: return py::bool_(x.b);
          case Value::Kind::Tensor: return tensor_array(x.tensor, views);
          default: throw UserError("an output that is a function or a pending tensor cannot be returned");
        }
      },
      [](const std::string& name) -> py::object { return py::str(name); });
}

// The gradients grads[next...] in the structure of an instance: an array where it has a tensor,
// None for its numbers and nullary constructors.
py::object gradient_structure(const Value& instance, std::vector<Tensor>& grads) {
  size_t next = 0;
  py::object out = python_structure(
      instance,
      [&](const Value& x) -> py::object {
        if (x.kind != Value::Kind::Tensor) return py::none();
        ACROBAT_ASSERT(next < grads.size(), "a gradient for each tensor of the instance");
        return tensor_array(std::make_shared<Tensor>(std::move(grads[next++])), {});
      },
      [](const std::string&) -> py::object { return py::none(); });
  ACROBAT_ASSERT(next == grads.size(), "one gradient for each tensor of the instance");
  return out;
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

namespace {

std::string shown(py::handle h) { return py::repr(h).cast<std::string>(); }

// An int (or numpy integer), not a bool, as a Python int; nullopt otherwise.
std::optional<py::int_> whole(py::handle h) {
  if (py::isinstance<py::bool_>(h) || !PyIndex_Check(h.ptr())) return std::nullopt;
  return py::reinterpret_steal<py::int_>(PyNumber_Index(h.ptr()));
}

}  // namespace

int64_t integer_argument(const std::string& flag, py::handle h, int64_t min, int64_t max) {
  if (auto i = whole(h)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i->ptr(), &overflow);
    if (!overflow && v >= min && v <= max) return v;
  }
  bad_integer(flag, shown(h), min, static_cast<uint64_t>(max));
}

uint64_t seed_argument(py::handle h) {
  if (auto i = whole(h)) {
    const unsigned long long v = PyLong_AsUnsignedLongLong(i->ptr());
    if (!PyErr_Occurred()) return v;
    PyErr_Clear();
  }
  bad_integer("--seed", shown(h), 0, UINT64_MAX);
}

double real_argument(const std::string& flag, py::handle h) {
  if (!py::isinstance<py::bool_>(h) && !py::isinstance<py::str>(h) && py::hasattr(h, "__float__")) {
    const double v = PyFloat_AsDouble(h.ptr());
    if (!PyErr_Occurred()) return v;
    PyErr_Clear();
  }
  throw UserError(given(flag, shown(h)) + ": expected a number");
}

std::string text_argument(const std::string& flag, py::handle h) {
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  if (py::hasattr(h, "__fspath__")) return py::str(h.attr("__fspath__")()).cast<std::string>();
  throw UserError(argument(flag) + "=" + shown(h) + ": expected a string");
}

std::map<std::string, int64_t> dims_argument(py::handle h) {
  std::map<std::string, int64_t> out;
  if (h.is_none()) return out;
  if (!py::isinstance<py::dict>(h)) throw UserError(argument("--set") + "=" + shown(h) + ": expected a dict of name to size");
  for (auto [k, v] : h.cast<py::dict>()) {
    if (!py::isinstance<py::str>(k))
      throw UserError(argument("--set") + ": the name " + shown(k) + " is not a string");
    const std::string name = k.cast<std::string>();
    auto i = whole(v);
    int overflow = 0;
    const long long n = i ? PyLong_AsLongLongAndOverflow(i->ptr(), &overflow) : 0;
    if (!i || overflow || n <= 0) bad_integer("--set", name + "=" + shown(v), 1, INT64_MAX);
    out[name] = n;
  }
  return out;
}

}  // namespace acrobat::python
