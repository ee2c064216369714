// Helpers shared by the language tests: paths into the source tree, compiling and running model
// text held in the test, reading values back, and a scratch directory.
#pragma once

#include "testing/temp_dir.h"
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ir/ir.h"
#include "ir/lower.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/inputs.h"
#include "runtime/params.h"
#include "engines/reference_engine.h"

namespace acrobat::test {

inline std::string source_path(const std::string& relative) {
  return std::string(ACROBAT_SOURCE_DIR) + "/" + relative;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The files in `dir` (relative to the source tree) whose names end in `ext`, sorted by name.
inline std::vector<std::string> files_in(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(source_path(dir)))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Parses, checks and lowers model text (named `file` in diagnostics).
inline std::shared_ptr<const ir::Module> compile_text(const std::string& text,
                                                      const DimOverrides& dims = {},
                                                      const std::string& file = "test.acr") {
  return compile_checked(parse_model_text(file, text, dims), CompileOptions{});
}

// The type of the entry function's one parameter.
inline Type entry_input_type(const ir::Module& m, const std::string& entry = "main") {
  const auto& f = m.functions[entry_function(m, entry)];
  return f.vars[f.params[0]].type;
}

// Runs `entry` of the module with the reference engine on instances given as JSON, and returns the
// outputs as JSON (an array with one element per instance).
inline nlohmann::json run_json(const std::shared_ptr<const ir::Module>& m,
                               const std::vector<nlohmann::json>& instances,
                               std::shared_ptr<const ParamStore> params = nullptr,
                               const std::string& entry = "main") {
  if (!params) params = std::make_shared<ParamStore>(init_params(*m, 0));
  Type in = entry_input_type(*m, entry);
  std::vector<Value> inputs;
  for (size_t i = 0; i < instances.size(); ++i)
    inputs.push_back(value_from_json(instances[i], in, SourceLoc{"instances", uint32_t(i + 1), 1}));
  ReferenceEngine engine(m, params);
  RunResult r = engine.run(inputs, entry);
  const Type& out = m->functions[entry_function(*m, entry)].ret;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& v : r.outputs) results.push_back(value_to_json(v, out));
  return results;
}

// Compiles `text` and runs its `main` on one instance.
inline nlohmann::json run_one(const std::string& text, const nlohmann::json& instance) {
  return run_json(compile_text(text), {instance})[0];
}

// The UserError that f() throws; fails the test (and returns an empty error) if it throws nothing or
// something else.
template <class F>
UserError user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than UserError: " << e.what();
    return UserError("");
  }
  ADD_FAILURE() << "did not throw";
  return UserError("");
}

using TempDir = ::acrobat::test_support::TempDir;

}  // namespace acrobat::test
