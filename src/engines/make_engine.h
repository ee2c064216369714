// The one way to build an engine: by name, from a compiled module and its params. The CLI, the
// Python package and the benchmarks all call make_engine, so that an engine name, its options and
// the default thread count mean the same everywhere.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engines/engine.h"
#include "runtime/graph.h"

namespace acrobat {

// The engines by name, in the order help texts list them: "batched", "aot", "reference".
const std::vector<std::string>& engine_names();
// "batched, aot or reference" (for messages and help texts).
std::string engine_names_text();
// A UserError naming `option` and the engines when `name` is not one of them.
void check_engine_name(const std::string& name, const std::string& option = "engine");

// The batched engines' schedulers by name (scheduler_name of each, runtime/graph.h): inline-depth,
// depth, agenda.
const std::vector<std::string>& scheduler_names();

struct EngineSpec {
  std::string engine = "batched";  // one of engine_names()
  int threads = 0;                 // 0: every core this process may run on (default_threads)
  Scheduler scheduler = Scheduler::InlineDepth;  // the batched engines'
  std::string object{};            // aot: a prebuilt shared object; "" to generate, build and cache
  std::string cache_dir{};         // aot: the compile cache; "" for the default
  int64_t max_steps = 0;           // each instance's step budget (Engine::limit_steps); 0: none
};

// `threads`, or every core this process may run on when it is 0 (or less).
int thread_count(int threads);

// The engine `spec` names, on `module` and `params`. Throws UserError for an unknown engine name
// or an AOT object that does not belong to the module.
std::unique_ptr<Engine> make_engine(const EngineSpec& spec, std::shared_ptr<const ir::Module> module,
                                    std::shared_ptr<const ParamStore> params);

}  // namespace acrobat
