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

}  // namespace acrobat
