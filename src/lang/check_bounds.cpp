// Bounds on what a model may allocate: every tensor type must fit the kernels' index type and the
// machine's memory, and the params together must fit the machine's memory. A model that breaks them
// is reported here, at the param or expression that is too big, instead of failing to allocate
// when it runs.
#include "lang/checker.h"
#include "support/sizes.h"

namespace acrobat::checker {

namespace {

constexpr int64_t kBytesPerElement = sizeof(float);

}  // namespace

bool Checker::admit_tensor(const std::vector<int64_t>& shape, const SourceLoc& at,
                           const std::string& what) {
  std::string tensor = what + " f32" + shape_str(shape);
  // A size variable counts as 1 here: the constant part alone must fit. (An instance's sizes are
  // for the run to check.)
  std::vector<int64_t> fixed = shape;
  for (int64_t& d : fixed)
    if (is_size_var(d)) d = 1;
  std::optional<int64_t> elements = checked_product<int64_t>(fixed);
  if (!elements || *elements > kMaxTensorElements) {
    sink_.error(at, tensor + " has " +
                        (elements ? std::to_string(*elements) : "more than " + std::to_string(INT64_MAX)) +
                        " elements; a tensor holds at most " + std::to_string(kMaxTensorElements) +
                        " (the kernels index elements with int)");
    return false;
  }
  int64_t bytes = *elements * kBytesPerElement;  // at most 2^33: no overflow
  if (bytes > memory_) {
    sink_.error(at, tensor + " needs " + byte_size_str(bytes) + ", more than this machine's " +
                        byte_size_str(memory_) + " of memory");
    return false;
  }
  return true;
}

void Checker::check_param_memory() {
  int64_t total = 0;
  const ParamDecl* largest = nullptr;
  int64_t largest_bytes = 0;
  for (auto& p : m_.params) {
    if (!params_.count(p->name) || params_.at(p->name) != p.get()) continue;  // reported
    // admit_tensor bounded one tensor; an indexed param holds `count` of them.
    int64_t one = num_elements(p->shape) * kBytesPerElement;
    int64_t bytes = checked_mul<int64_t>(one, std::max<int64_t>(p->resolved_count, 1)).value_or(INT64_MAX);
    total = checked_add(total, bytes).value_or(INT64_MAX);
    if (bytes > largest_bytes) {
      largest = p.get();
      largest_bytes = bytes;
    }
  }
  if (total <= memory_) return;
  std::string what = largest->count ? std::to_string(largest->resolved_count) + " tensors f32" +
                                          shape_str(largest->shape)
                                    : "f32" + shape_str(largest->shape);
  sink_.error(largest->span.begin,
              "param " + quote(largest->name) + " needs " + byte_size_str(largest_bytes) + " (" +
                  what + "), and the params need " + byte_size_str(total) +
                  " in total, more than this machine's " + byte_size_str(memory_) + " of memory");
}

}  // namespace acrobat::checker
