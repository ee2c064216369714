// Model parameters at run time: loaded from a safetensors file and checked against the model's
// `param` declarations, or initialised from a seed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/value.h"

namespace acrobat {

struct ParamValue {
  bool frozen = false;  // ir::Param::frozen: the optimiser leaves it as it is
  // A plain param: the tensor itself. An indexed param `p[N]: f32[...]`: all N tensors in one
  // buffer of shape [N, ...], and `row(i)` views one of them.
  Tensor tensor;
  Value value;  // `tensor` as a host value, shared by every load of the param
  int64_t count = 0;
  std::vector<int64_t> elem_shape;
  // An indexed matrix param: each matrix prepared for GEMM (what `row(i)` carries as `packed`).
  std::vector<std::shared_ptr<const kernels::PackedWeights>> packed_rows;

  Tensor row(int64_t i) const;
};

struct ParamStore {
  std::vector<ParamValue> params;  // in the order of ir::Module::params
  std::string source;              // the file they came from, or "seed N"
};

// How tensors offered by name meet the params (by default as the CLI's --params: a tensor the
// model has no param for is listed in `unused`, a param without a tensor is an error).
struct ParamMatching {
  // A tensor no param is named as: an error naming every such tensor, instead of listed in `unused`.
  bool unknown_is_error = false;
  // A param no tensor is offered for: a copy of this store's, instead of an error; its name is
  // added to `kept` (if given).
  const ParamStore* keep = nullptr;
  std::vector<std::string>* kept = nullptr;
};

// Loads `path` and matches its tensors to the module's params by name. A file tensor fits a param
// when the shapes agree after dropping dimensions of size 1 (so a bias f32[1, H] may be stored as
// [H] and an embedding emb[V]: f32[1, E] as [V, E]). Missing params and shape mismatches are errors
// that name the file, the tensor and the declaration; tensors the model does not use are listed in
// `unused` (if given) for the caller to warn about. A file of gradients (`acrobat grad`'s,
// kGradientsMetadata) is refused with an error saying so.
ParamStore load_params(const ir::Module& module, const std::string& path, std::vector<std::string>* unused = nullptr,
                       const ParamMatching& matching = {});

// The metadata entry that marks a safetensors file as gradients rather than params.
inline constexpr const char* kContentKey = "content";
inline constexpr const char* kGradientsContent = "gradients";

// A tensor offered as a param (a file's, a caller's array): its shape and row-major floats.
struct ParamSource {
  std::vector<int64_t> shape;
  const float* data = nullptr;
};
// load_params' matching for tensors by name from anywhere (`where` names them in messages): every
// param needs one whose shape agrees after dropping dimensions of size 1 (unless `matching` keeps
// it). The params are copies: the tensors' memory is not used after this returns.
ParamStore params_from(const ir::Module& module, const std::map<std::string, ParamSource>& tensors,
                       const std::string& where, std::vector<std::string>* unused = nullptr,
                       const ParamMatching& matching = {});

// The tensors of `params`, copied (to change them without touching `params`; make_params makes
// params of them again).
std::vector<Tensor> copy_tensors(const ParamStore& params);

// Params from one tensor per param of `module` in its order, each of the param's full shape
// (an indexed param: [count, ...]), prepared for the kernels as loaded ones are; `source` names them.
ParamStore make_params(const ir::Module& module, std::vector<Tensor> tensors, std::string source);

// After the tensors of `params` changed in place (an optimiser's step): their copies prepared for
// GEMM again, in the same storage, so that engines built on `params` compute with the new values.
// Not while an engine runs.
void refresh_packed(const ParamStore& params);

// Deterministic initialisation: every element uniform in [-s, s] with s = 1/sqrt(fan_in) for
// matrices (fan_in = the first dimension of the element shape) and s = 0.1 for vectors.
ParamStore init_params(const ir::Module& module, uint64_t seed);

}  // namespace acrobat
