// Model inputs and outputs as values: `--input KIND:FILE` readers that build instances of the entry
// function's parameter type, and JSON for any output value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/value.h"

namespace acrobat {

enum class InputKind {
  Sst,        // Penn-Treebank trees -> the prelude's Tree (word ids from a vocabulary), or its
              // LabelledTree (each node's sentiment label too) for an entry that takes that
  SstTokens,  // Penn-Treebank trees -> List[int] of the leaves' word ids, left to right, or
              // LabelledWords (the root's label too) for an entry that takes that
  Tokens,     // lines of whitespace-separated ids -> List[int]
  Json,       // one JSON value per line -> any type (see value_from_json)
  Lengths,    // one length n per line -> a tensor f32[n, ...] of the entry's type, random numbers
              // in [-1, 1] seeded by the line number (ragged benchmarks on real length files)
};

struct InputSpec {
  InputKind kind;
  std::string path;
};

// Parses "KIND:FILE"; an unknown kind is a UserError that lists the known ones.
InputSpec parse_input_spec(const std::string& spec);
const char* input_kind_name(InputKind kind);

// The vocabulary an input reads words with: `given` when there is one, else, for the SST kinds,
// vocab.txt beside the data file when it exists (data/sst/vocab.txt for data/sst/test.txt), else "".
std::string vocab_path(const InputSpec& spec, const std::string& given);

// Reads at most `limit` instances (0: all) of `type` from the input. `vocab_path` is needed by the
// SST kinds. Errors name the file, line and column of the offending instance.
std::vector<Value> load_inputs(const InputSpec& spec, const Type& type, const std::string& vocab_path,
                               size_t limit);

// Whether instances of `spec` come with labels: the roots' of SST trees, for `sst:` (trees) and
// `sst-tokens:` (their sentences).
bool has_root_labels(const InputSpec& spec);
// The labels of the roots of the first `count` trees of such a file: what the accuracy of a model's
// prediction for each tree or sentence is measured against (held-out sets, Instances.labels in
// Python).
std::vector<int> sst_root_labels(const InputSpec& spec, size_t count);

// Whether `type` is what the `lengths:` input makes: f32[n, ...], n a size variable, the rest fixed;
// or a pair (f32[1, C], f32[n, ...]) of a one-hot label and such rows (a loss entry's instance).
bool is_rows_type(const Type& type);
// The instance the `lengths:` input makes of length n for an entry parameter of such a type:
// numbers uniform in [-1, 1] from a generator seeded by `seed`; of a pair, the label's class is the
// same generator's next draw modulo C (the rows are those of the unlabelled type).
Value random_rows(const Type& type, int64_t n, uint64_t seed);

// JSON encoding of values, shared by inputs and outputs: int/float/bool as JSON scalars; a tensor as
// {"shape": [...], "data": [flat row-major values]} (inputs also accept nested arrays of the right
// shape); a tuple and a List as arrays; another data-type value as {"Ctor": [fields...]}, or "Ctor"
// when it has no fields.
nlohmann::json value_to_json(const Value& value, const Type& type);
// `where` names the instance for messages, e.g. "inputs.jsonl:3:1".
Value value_from_json(const nlohmann::json& json, const Type& type, const SourceLoc& where);

// A predict request's body, {"instances": [...]} (TensorFlow Serving's and KServe v1's REST
// convention) with, optionally, "priority": 0 to kMaxPriority (higher runs first; default 0) and
// "deadline_ms": 1 to kMaxDeadlineMs (the answer is a 504 once that long has passed; default: the
// server's) and "stream": true or false (the answer as server-sent events, each value the model
// emits as it comes; default false). Each instance converted to `type`; parsed as the input files are (nesting bounded by
// io::kMaxJsonDepth, no key twice; other keys, such as TensorFlow Serving's "signature_name", are
// ignored). Anything else (a value out of range) is a UserError saying what is wrong and where (a
// byte offset, or "instances[i]"); it never names a file.
struct PredictRequest {
  std::vector<Value> instances;
  int priority = 0;
  int64_t deadline_ms = 0;  // 0: not given
  bool stream = false;
};
inline constexpr int kMaxPriority = 9;
inline constexpr int64_t kMaxDeadlineMs = 3'600'000;
PredictRequest parse_predict_request(std::string_view body, const Type& type);

}  // namespace acrobat
