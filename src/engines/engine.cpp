#include "engines/engine.h"

#include <algorithm>
#include <map>

#include "analysis/plan.h"
#include "lang/frontend.h"
#include "support/clock.h"
#include "support/surface.h"

namespace acrobat {

int entry_function(const ir::Module& module, const std::string& entry) {
  // The checks with positions live with the syntax tree (check_entry); a module built without one
  // still gets them here, without a position.
  if (module.source) check_entry(*module.source, entry);
  int index = module.find_function(entry);
  if (index < 0) throw UserError("the model has no function '" + entry + "' to run");
  const auto& f = module.functions[index];
  if (f.declared_params() != 1 || f.num_captures != 0)
    throw UserError(f.span.begin, "entry function '" + entry +
                                      "' must take exactly one parameter (the input instance), "
                                      "found " + std::to_string(f.declared_params()));
  return index;
}

int loss_function(const ir::Module& module, const std::string& entry) {
  const int index = entry_function(module, entry);
  const ir::Function& f = module.functions[index];
  if (f.ret->kind != TypeKind::Tensor || is_ragged(f.ret->shape) || num_elements(f.ret->shape) != 1)
    throw UserError(f.span.begin, "the loss entry '" + entry + "' returns " + type_str(f.ret) +
                                      "; gradients need one number per instance (f32[], f32[1] or f32[1, 1])");
  return index;
}

std::vector<Tensor> zero_grads(const ParamStore& params, std::vector<Tensor> zeroed) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < params.params.size(); ++k) {
    const ParamValue& p = params.params[k];
    if (k < zeroed.size() && zeroed[k].shape == p.tensor.shape && zeroed[k].data.use_count() == 1) {
      out.push_back(std::move(zeroed[k]));
      continue;
    }
    Tensor t = Tensor::allocate(p.tensor.shape);
    std::fill_n(t.data.get(), t.size(), 0.0f);
    out.push_back(std::move(t));
  }
  return out;
}

namespace {
bool mentions_sizes(const Type& t) {
  if (t->kind == TypeKind::Tensor) return is_ragged(t->shape);
  for (const auto& a : t->args)
    if (mentions_sizes(a)) return true;
  return false;
}

// Binds the size variables of `type` from value `v` (its tensors' shapes) into `sizes`, and checks
// every tensor of `v` against them: the batched engines read each instance's data by these sizes.
void bind_entry_sizes(const Type& type, const Value& v, std::map<int64_t, int64_t>& sizes) {
  if (!mentions_sizes(type)) return;
  if (type->kind == TypeKind::Tuple) {
    for (size_t i = 0; i < type->args.size(); ++i) bind_entry_sizes(type->args[i], v.agg->fields[i], sizes);
    return;
  }
  if (type->kind == TypeKind::Adt) {
    // A list's spine by a loop; another data type's fields at their types.
    const AdtDef* adt = type->adt;
    for (const Value* cur = &v; cur;) {
      const CtorDef* ctor = cur->agg->ctor;
      const Value* next = nullptr;
      for (size_t i = 0; i < ctor->fields.size(); ++i) {
        Type field = substitute_params(ctor->fields[i], adt->type_params, type->args);
        if (adt->is_list() && i + 1 == ctor->fields.size()) {
          next = &cur->agg->fields[i];
          continue;
        }
        bind_entry_sizes(field, cur->agg->fields[i], sizes);
      }
      cur = next;
    }
    return;
  }
  if (type->kind != TypeKind::Tensor) return;
  const std::vector<int64_t>& shape = v.tensor->shape;
  if (shape.size() != type->shape.size())
    throw UserError("the instance's tensor " + shape_str(shape) + " does not have the rank of " +
                    type_str(type));
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t want = type->shape[d];
    if (!is_size_var(want)) {
      if (shape[d] != want)
        throw UserError("the instance's tensor " + shape_str(shape) + " does not fit " + type_str(type));
      continue;
    }
    auto [it, fresh] = sizes.emplace(want, shape[d]);
    if (shape[d] < 1 || it->second != shape[d])
      throw UserError("the instance's tensors give size " + dim_str(want) + " the values " +
                      std::to_string(it->second) + " and " + std::to_string(shape[d]) +
                      " (a size variable has one value, at least 1)");
  }
}
}  // namespace

std::vector<Value> entry_arguments(const ir::Module& module, int func, const Value& input) {
  const ir::Function& f = module.functions[func];
  std::vector<Value> args{input};
  if (f.size_params.empty()) return args;
  std::map<int64_t, int64_t> sizes;
  static const std::vector<std::string> none;
  SizeNamesScope names(module.plan ? module.plan->size_names : none);
  bind_entry_sizes(f.vars[f.params[0]].type, input, sizes);
  for (int64_t d : f.size_params) {
    auto it = sizes.find(d);
    ACROBAT_ASSERT(it != sizes.end(), "an entry size variable its parameter does not bind");
    args.push_back(Value::of_int(it->second));
  }
  return args;
}

OnError parse_on_error(const std::string& text) {
  if (text == "raise") return OnError::Raise;
  if (text == "skip") return OnError::Skip;
  throw UserError(given("--on-error", text) + ": expected " + one_of({"'raise'", "'skip'"}));
}

std::vector<size_t> call_leaving_out_failures(const std::vector<Value>& inputs,
                                              FunctionRef<void(const std::vector<Value>&)> call,
                                              FunctionRef<void(size_t, const UserError&)> left_out) {
  std::vector<size_t> left;  // the instances still in, by index in `inputs`
  for (size_t i = 0; i < inputs.size(); ++i) left.push_back(i);
  std::vector<Value> part;  // after a failure: inputs[left]
  const std::vector<Value>* in = &inputs;
  for (;;) {
    try {
      call(*in);
      return left;
    } catch (const UserError& e) {
      // Not an instance's failure (a wrong entry, ...): no instance to leave out.
      if (!e.instance() || *e.instance() >= left.size()) throw;
      const size_t k = *e.instance();
      left_out(left[k], e);
      left.erase(left.begin() + static_cast<ptrdiff_t>(k));
      if (left.empty()) return left;
      part.clear();
      for (size_t i : left) part.push_back(inputs[i]);
      in = &part;
    }
  }
}

namespace {

// One batch `inputs[begin, end)` run without its instances that fail; their outputs stay empty.
void run_skipping(Engine& engine, const std::vector<Value>& inputs, size_t begin, size_t end,
                  const std::string& entry, const std::vector<size_t>& numbers, RunResult& result) {
  const std::vector<Value> batch(inputs.begin() + static_cast<ptrdiff_t>(begin),
                                 inputs.begin() + static_cast<ptrdiff_t>(end));
  RunResult part;
  const std::vector<size_t> ran = call_leaving_out_failures(
      batch, [&](const std::vector<Value>& in) { part = engine.run(in, entry, 0); },
      [&](size_t i, const UserError& e) {
        const size_t failed = begin + i;
        result.failures.push_back({failed, for_instance(e, numbers.empty() ? failed : numbers[failed]).what()});
      });
  if (ran.empty()) return;
  result.stats.add(part.stats);
  for (size_t k = 0; k < ran.size(); ++k) result.outputs[begin + ran[k]] = std::move(part.outputs[k]);
}

}  // namespace

RunResult run_batches(Engine& engine, const std::vector<Value>& inputs, size_t batch, const std::string& entry,
                      OnError on_error, const std::vector<size_t>& numbers) {
  ACROBAT_ASSERT(numbers.empty() || numbers.size() == inputs.size(), "a number for each instance");
  if (on_error == OnError::Raise && numbers.empty()) return engine.run_batches(inputs, batch, entry);
  const auto t0 = Clock::now();
  try {
    return engine.run_batches(inputs, batch, entry);
  } catch (const UserError& e) {
    if (!e.instance() || *e.instance() >= inputs.size()) throw;
    if (on_error == OnError::Raise) throw for_instance(e, numbers[*e.instance()]);
  }
  RunResult result;
  result.outputs.resize(inputs.size());
  const size_t step = batch == 0 ? std::max<size_t>(inputs.size(), 1) : batch;
  for (size_t begin = 0; begin < inputs.size(); begin += step)
    run_skipping(engine, inputs, begin, std::min(inputs.size(), begin + step), entry, numbers, result);
  std::sort(result.failures.begin(), result.failures.end(),
            [](const InstanceFailure& a, const InstanceFailure& b) { return a.instance < b.instance; });
  result.stats.wall_seconds = seconds_since(t0);  // the failed runs too
  return result;
}

RunResult Engine::run_batches(const std::vector<Value>& inputs, size_t batch,
                              const std::string& entry) {
  RunResult result;
  size_t step = batch == 0 ? std::max<size_t>(inputs.size(), 1) : batch;
  for (size_t begin = 0; begin < inputs.size(); begin += step) {
    std::vector<Value> chunk(inputs.begin() + begin,
                             inputs.begin() + std::min(inputs.size(), begin + step));
    RunResult part = run(chunk, entry, begin);
    result.stats.add(part.stats);
    for (auto& v : part.outputs) result.outputs.push_back(std::move(v));
  }
  return result;
}

RunStats Engine::run_open(InstanceFeed& feed, size_t max_live, const std::string& entry) {
  (void)max_live;  // one at a time
  RunStats stats;
  for (;;) {
    std::vector<InstanceFeed::Joining> joining = feed.take(true, 1);
    if (joining.empty()) return stats;
    for (InstanceFeed::Joining& j : joining) {
      if (feed.cancelled(j.ticket)) {
        feed.stopped(j.ticket);
        continue;
      }
      try {
        RunResult r = run({std::move(j.input)}, entry, j.number);
        stats.add(r.stats);
        feed.finished(j.ticket, std::move(r.outputs[0]));
      } catch (const UserError& e) {
        feed.failed(j.ticket, e.what(), false);
      } catch (const std::exception& e) {
        feed.failed(j.ticket, e.what(), true);
      }
    }
  }
}

std::vector<std::shared_ptr<const Tensor>> instance_tensors(const Value& instance) {
  std::vector<std::shared_ptr<const Tensor>> out;
  // Depth first by a stack of its own: a long list is a chain as long as itself.
  std::vector<const Value*> todo{&instance};
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (v->kind == Value::Kind::Tensor) out.push_back(v->tensor);
    if (v->agg && (v->kind == Value::Kind::Tuple || v->kind == Value::Kind::Adt))
      for (size_t k = v->agg->fields.size(); k-- > 0;) todo.push_back(&v->agg->fields[k]);
  }
  return out;
}

InputGradients::InputGradients(const ir::Module& module, const ParamStore& params, const std::vector<Value>& inputs) {
  struct Stretch {
    const float* begin;
    const float* end;
  };
  std::vector<Stretch> stretches;
  for (const Value& v : inputs) {
    tensors_.push_back(instance_tensors(v));
    for (const auto& t : tensors_.back())
      if (t->size() > 0) stretches.push_back({t->data.get(), t->data.get() + t->size()});
  }
  std::sort(stretches.begin(), stretches.end(), [](const Stretch& a, const Stretch& b) { return a.begin < b.begin; });
  // Overlapping stretches merged: one leaf each, so that leaves never overlap (InputLeaf).
  std::vector<Stretch> merged;
  for (const Stretch& s : stretches) {
    if (!merged.empty() && s.begin < merged.back().end)
      merged.back().end = std::max(merged.back().end, s.end);
    else
      merged.push_back(s);
  }
  for (const Stretch& s : merged) {
    for (size_t p = 0; p < params.params.size(); ++p) {
      const Tensor& t = params.params[p].tensor;
      if (s.begin < t.data.get() + t.size() && t.data.get() < s.end)
        throw UserError("an instance's tensor lies in the memory of param '" + module.params[p].name +
                        "': a gradient with respect to it would also be one with respect to the param; give the "
                        "instance a copy");
    }
    const int64_t size = s.end - s.begin;
    storage_.push_back(std::make_shared<float[]>(static_cast<size_t>(size)));  // zeroed
    leaves_.push_back({s.begin, size, storage_.back().get()});
  }
}

size_t InputGradients::leaf_of(const Tensor& t) const {
  const float* p = t.data.get();
  auto it = std::upper_bound(leaves_.begin(), leaves_.end(), p,
                             [](const float* x, const InputLeaf& l) { return x < l.begin; });
  ACROBAT_ASSERT(it != leaves_.begin() && p < (it - 1)->begin + (it - 1)->size, "an input tensor has a leaf");
  return static_cast<size_t>(it - leaves_.begin() - 1);
}

float* InputGradients::gradient_of(const Tensor& t) const {
  const InputLeaf& l = leaves_[leaf_of(t)];
  return l.grad + (t.data.get() - l.begin);
}

std::vector<std::vector<Tensor>> InputGradients::take() {
  // A leaf of one tensor is handed over as it is; a tensor that shares its leaf gets a copy of its part.
  std::vector<int> uses(leaves_.size(), 0);
  for (const auto& ts : tensors_)
    for (const auto& t : ts)
      if (t->size() > 0) ++uses[leaf_of(*t)];
  std::vector<std::vector<Tensor>> out(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i)
    for (const auto& t : tensors_[i]) {
      Tensor g;
      const size_t k = t->size() > 0 ? leaf_of(*t) : 0;
      if (t->size() > 0 && uses[k] == 1 && leaves_[k].size == t->size()) {
        g.shape = t->shape;
        g.data = storage_[k];
      } else {
        g = Tensor::allocate(t->shape);
        if (t->size() > 0) std::copy_n(gradient_of(*t), t->size(), g.data.get());
      }
      out[i].push_back(std::move(g));
    }
  return out;
}

}  // namespace acrobat
