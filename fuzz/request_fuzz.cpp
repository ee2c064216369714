// Fuzzes the body of a predict request as `acrobat serve` reads it (parse_predict_request, the
// very function its endpoint calls, without HTTP) for the input types of input_types.h: a tree, a
// list of word ids, a tensor, a data type of the model's own. Any bytes must give instances (with
// a priority and a deadline in range) or a UserError; the instances must convert back to JSON.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engines/inputs.h"
#include "input_types.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const acrobat::Type& type : acrobat::fuzz::input_types()) {
    try {
      const acrobat::PredictRequest request = acrobat::parse_predict_request(body, type);
      if (request.priority < 0 || request.priority > acrobat::kMaxPriority || request.deadline_ms < 0 ||
          request.deadline_ms > acrobat::kMaxDeadlineMs)
        __builtin_trap();
      for (const acrobat::Value& v : request.instances) acrobat::value_to_json(v, type).dump();
    } catch (const acrobat::UserError&) {
    }
  }
  return 0;
}
