#include "runtime/params.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "acrobat/kernels.h"
#include "io/safetensors.h"

namespace acrobat {

Tensor ParamValue::row(int64_t i) const {
  Tensor t;
  t.shape = elem_shape;
  int64_t n = num_elements(elem_shape);
  t.data = std::shared_ptr<float[]>(tensor.data, tensor.data.get() + i * n);
  if (!packed_rows.empty()) t.packed = packed_rows[static_cast<size_t>(i)];
  return t;
}

namespace {

std::vector<int64_t> full_shape(const ir::Param& p) {
  std::vector<int64_t> shape = p.shape;
  if (p.count > 0) shape.insert(shape.begin(), p.count);
  return shape;
}

std::vector<int64_t> without_ones(const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  for (int64_t d : shape)
    if (d != 1) out.push_back(d);
  return out;
}

// Prepares the matrices of a param for GEMM (any 2-D param, or element of an indexed one, may be a
// matmul's right operand: `x @ W` or `x @ W[layer]`); the packed copies read the param's own
// memory on the row-major paths (the tensor owns both). Rows of an indexed param (`emb[V]: f32[1, E]`:
// embeddings, biases per layer) are left as they are: there are many, and they are read as vectors.
ParamValue make_value(const ir::Param& p, Tensor t) {
  ParamValue v;
  v.frozen = p.frozen;
  v.count = p.count;
  v.elem_shape = p.shape;
  if (p.shape.size() == 2) {
    const int K = static_cast<int>(p.shape[0]), N = static_cast<int>(p.shape[1]);
    if (p.count == 0) {
      t.packed = kernels::pack_weights_in_place(K, N, t.data.get(), N);
    } else if (K > 1) {
      for (int64_t i = 0; i < p.count; ++i)
        v.packed_rows.push_back(kernels::pack_weights_in_place(K, N, t.data.get() + i * K * N, N));
    }
  }
  v.tensor = std::move(t);
  v.value = Value::of_tensor(v.tensor);
  return v;
}

std::string declared(const ir::Param& p) {
  std::string s = "param " + p.name;
  if (p.count) s += "[" + std::to_string(p.count) + "]";
  s += ": f32" + shape_str(p.shape);
  return "`" + s + "` declared at " + p.span.begin.str();
}

}  // namespace

ParamStore load_params(const ir::Module& module, const std::string& path, std::vector<std::string>* unused,
                       const ParamMatching& matching) {
  std::map<std::string, std::string> metadata;
  const auto tensors = io::read_safetensors(path, &metadata);
  auto content = metadata.find(kContentKey);
  if (content != metadata.end() && content->second == kGradientsContent)
    throw UserError(SourceLoc{path}, "holds gradients (written by `acrobat grad`), not params (such as a "
                                     "checkpoint that `acrobat train` writes)");
  std::map<std::string, ParamSource> sources;
  for (const auto& [name, t] : tensors) sources[name] = {t.shape, t.data.data()};
  return params_from(module, sources, path, unused, matching);
}

ParamStore params_from(const ir::Module& module, const std::map<std::string, ParamSource>& tensors,
                       const std::string& where, std::vector<std::string>* unused, const ParamMatching& matching) {
  ParamStore store;
  store.source = where;
  std::vector<Diagnostic> errors;
  std::set<std::string> used;
  for (size_t k = 0; k < module.params.size(); ++k) {
    const ir::Param& p = module.params[k];
    auto it = tensors.find(p.name);
    if (it == tensors.end() && matching.keep) {
      const Tensor& kept = matching.keep->params[k].tensor;
      Tensor t = Tensor::allocate(kept.shape);
      std::copy_n(kept.data.get(), t.size(), t.data.get());
      store.params.push_back(make_value(p, std::move(t)));
      if (matching.kept) matching.kept->push_back(p.name);
      continue;
    }
    if (it == tensors.end()) {
      std::string have;
      for (auto& [name, _] : tensors) have += (have.empty() ? "" : ", ") + name;
      errors.push_back({SourceLoc{where}, "no tensor named '" + p.name + "' for " + declared(p) +
                                              (have.empty() ? "; " + where + " holds no tensors"
                                                            : "; " + where + " holds: " + have)});
      continue;
    }
    auto expected = full_shape(p);
    if (without_ones(it->second.shape) != without_ones(expected)) {
      errors.push_back({SourceLoc{where}, "tensor '" + p.name + "' has shape " +
                                              shape_str(it->second.shape) + ", expected " +
                                              shape_str(expected) + " for " + declared(p)});
      continue;
    }
    Tensor t = Tensor::allocate(expected);
    std::copy_n(it->second.data, t.size(), t.data.get());
    store.params.push_back(make_value(p, std::move(t)));
    used.insert(p.name);
  }
  std::vector<std::string> unknown;
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;
    if (!used.count(name) && !std::any_of(module.params.begin(), module.params.end(),
                                          [&](const ir::Param& p) { return p.name == name; }))
      unknown.push_back(name);
  }
  if (matching.unknown_is_error && !unknown.empty()) {
    std::string quoted, names;
    for (const auto& n : unknown) quoted += (quoted.empty() ? "'" : ", '") + n + "'";
    for (const auto& p : module.params) names += (names.empty() ? "" : ", ") + p.name;
    errors.push_back({SourceLoc{where}, (unknown.size() == 1 ? "tensor " : "tensors ") + quoted +
                                            (unknown.size() == 1 ? " is not a param" : " are not params") +
                                            " of the model (its params: " + names + ")"});
  }
  if (!errors.empty()) throw UserError(std::move(errors));
  if (unused) *unused = std::move(unknown);
  return store;
}

void refresh_packed(const ParamStore& params) {
  for (const ParamValue& v : params.params) {
    if (v.elem_shape.size() != 2) continue;
    const int64_t K = v.elem_shape[0], N = v.elem_shape[1];
    // pack_weights made these objects mutable; the params share them as const with the kernels.
    if (v.tensor.packed)
      const_cast<kernels::PackedWeights&>(*v.tensor.packed).repack(v.tensor.data.get(), static_cast<int>(N));
    for (size_t i = 0; i < v.packed_rows.size(); ++i)
      const_cast<kernels::PackedWeights&>(*v.packed_rows[i]).repack(v.tensor.data.get() + int64_t(i) * K * N,
                                                                   static_cast<int>(N));
  }
}

std::vector<Tensor> copy_tensors(const ParamStore& params) {
  std::vector<Tensor> out;
  for (const ParamValue& v : params.params) {
    Tensor c = Tensor::allocate(v.tensor.shape);
    std::copy_n(v.tensor.data.get(), c.size(), c.data.get());
    out.push_back(std::move(c));
  }
  return out;
}

ParamStore make_params(const ir::Module& module, std::vector<Tensor> tensors, std::string source) {
  ACROBAT_ASSERT(tensors.size() == module.params.size(), "one tensor per param");
  ParamStore store;
  store.source = std::move(source);
  for (size_t k = 0; k < tensors.size(); ++k) {
    ACROBAT_ASSERT(tensors[k].shape == full_shape(module.params[k]), "a param tensor of another shape");
    store.params.push_back(make_value(module.params[k], std::move(tensors[k])));
  }
  return store;
}

ParamStore init_params(const ir::Module& module, uint64_t seed) {
  ParamStore store;
  store.source = "seed " + std::to_string(seed);
  std::mt19937_64 rng(seed);
  for (const auto& p : module.params) {
    Tensor t = Tensor::allocate(full_shape(p));
    auto nontrivial = without_ones(p.shape);
    double scale = nontrivial.size() >= 2 ? 1.0 / std::sqrt(static_cast<double>(nontrivial[0])) : 0.1;
    std::uniform_real_distribution<float> dist(static_cast<float>(-scale), static_cast<float>(scale));
    for (int64_t i = 0; i < t.size(); ++i) t.data[i] = dist(rng);
    store.params.push_back(make_value(p, std::move(t)));
  }
  return store;
}

}  // namespace acrobat
