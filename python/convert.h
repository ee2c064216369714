// Python values to acrobat's and back, for the module `acrobat._acrobat` (_acrobat.cpp): instances
// from Python values (the JSON input encoding), values as Python objects (tensors as numpy arrays),
// run statistics as dicts, and the arguments of the Python calls checked with their names
// (acrobat.Error in Python's words, support/surface.h).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/params.h"
#include "runtime/run_stats.h"
#include "runtime/value.h"

namespace acrobat::python {

namespace py = pybind11;

// A Python value as JSON, in the encoding of value_from_json (engines/inputs.h): numbers, bools,
// strings, lists and tuples as arrays, dicts as objects, a numpy array or a torch tensor as
// {"shape", "data"}. The walk recurses in C++, bounded as the files' readers bound nesting, so that
// a deep instance is an acrobat.Error rather than Python's recursion limit.
nlohmann::json to_json(py::handle h, int depth = 0);

// How tensors become numpy arrays: over the tensor's memory, without a copy, and read-only when
// the memory is shared with something a write must not change (params, instances). A tensor that
// lies in the memory of `params` (an output that is a param or a row of one) is copied.
struct TensorViews {
  bool read_only = false;
  const ParamStore* params = nullptr;
};
py::array tensor_array(const std::shared_ptr<const Tensor>& t, const TensorViews& views);

// A value as Python: a tensor as a numpy array (tensor_array), ints, floats and bools as such, a
// tuple as a tuple, a List as a list, another data-type value as {"Ctor": [fields]} (or "Ctor"
// with no fields), as value_to_json writes them.
py::object to_python(const Value& v, const TensorViews& views);

// The gradients of an instance's tensors (GradResult::input_grads[i], in instance_tensors' order,
// moved out of `grads`) in the instance's shape, as to_python writes it: an array for each tensor
// (writable, its own memory), tuples, lists and {"Ctor": [fields]} around them, and None for
// numbers, bools, units and constructors without fields.
py::object gradient_structure(const Value& instance, std::vector<Tensor>& grads);

py::dict stats_dict(const RunStats& s);

// The arguments of the Python calls, checked: an acrobat.Error naming the argument (`flag` is the
// CLI's name of it, support/surface.h spells it as Python's) and saying what it accepts.
int64_t integer_argument(const std::string& flag, py::handle h, int64_t min, int64_t max);
uint64_t seed_argument(py::handle h);
double real_argument(const std::string& flag, py::handle h);
std::string text_argument(const std::string& flag, py::handle h);
// `dims={'H': 64}`: each a positive integer.
std::map<std::string, int64_t> dims_argument(py::handle h);

}  // namespace acrobat::python
