// Comparing engine outputs in tests: tensors element by element to a relative tolerance (batched
// GEMMs may sum in another order than one-row ones), everything else exactly, through tuples and
// data-type values.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/value.h"

namespace acrobat {

inline void expect_values_close(const Value& a, const Value& e, const std::string& where, float rel,
                                float abs = 1e-7f) {
  ASSERT_EQ(a.kind, e.kind) << where;
  switch (e.kind) {
    case Value::Kind::Tensor:
      ASSERT_EQ(a.tensor->shape, e.tensor->shape) << where;
      for (int64_t i = 0; i < e.tensor->size(); ++i) {
        float x = a.tensor->data[i], y = e.tensor->data[i];
        ASSERT_LE(std::fabs(x - y), rel * std::fabs(y) + abs)
            << where << " element " << i << ": got " << x << ", expected " << y;
      }
      return;
    case Value::Kind::Int: EXPECT_EQ(a.i, e.i) << where; return;
    case Value::Kind::Float: EXPECT_EQ(a.f, e.f) << where; return;
    case Value::Kind::Bool: EXPECT_EQ(a.b, e.b) << where; return;
    case Value::Kind::Tuple:
    case Value::Kind::Adt:
      ASSERT_EQ(a.agg->ctor, e.agg->ctor) << where;
      ASSERT_EQ(a.agg->fields.size(), e.agg->fields.size()) << where;
      for (size_t i = 0; i < e.agg->fields.size(); ++i)
        expect_values_close(a.agg->fields[i], e.agg->fields[i], where + "." + std::to_string(i), rel, abs);
      return;
    default: return;
  }
}

}  // namespace acrobat
