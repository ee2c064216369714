#include "runtime/value.h"

namespace acrobat {

Tensor Tensor::allocate(std::vector<int64_t> shape) {
  Tensor t;
  int64_t n = num_elements(shape);
  t.shape = std::move(shape);
  t.data = std::shared_ptr<float[]>(new float[n > 0 ? n : 1]);
  return t;
}

Value Value::of_tensor(Tensor t) {
  Value x;
  x.kind = Kind::Tensor;
  x.tensor = std::make_shared<const Tensor>(std::move(t));
  return x;
}

namespace {
Value aggregate(Value::Kind kind, const CtorDef* ctor, int func, std::vector<Value> fields) {
  Value x;
  x.kind = kind;
  auto a = std::make_shared<Aggregate>();
  a->ctor = ctor;
  a->func = func;
  a->fields = std::move(fields);
  x.agg = std::move(a);
  return x;
}
}  // namespace

Value Value::tuple(std::vector<Value> fields) {
  return aggregate(Kind::Tuple, nullptr, -1, std::move(fields));
}
Value Value::adt(const CtorDef* ctor, std::vector<Value> fields) {
  return aggregate(Kind::Adt, ctor, -1, std::move(fields));
}
Value Value::closure(int func, std::vector<Value> captures) {
  return aggregate(Kind::Closure, nullptr, func, std::move(captures));
}

Aggregate::~Aggregate() {
  // Fields whose aggregate this one owns alone are taken out and destroyed here, one at a time; each
  // hands its own such fields to the same list before it goes.
  std::vector<std::shared_ptr<const Aggregate>> owned;
  auto take = [&owned](std::vector<Value>& fields) {
    for (Value& f : fields)
      if (f.agg && f.agg.use_count() == 1) owned.push_back(std::move(f.agg));
  };
  take(fields);
  while (!owned.empty()) {
    std::shared_ptr<const Aggregate> next = std::move(owned.back());
    owned.pop_back();
    // The last owner: nothing else reads it while its fields are moved out before it is freed.
    take(const_cast<Aggregate&>(*next).fields);
  }
}

}  // namespace acrobat
