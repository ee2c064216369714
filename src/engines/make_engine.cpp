#include "engines/make_engine.h"

#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "engines/reference_engine.h"
#include "runtime/thread_pool.h"
#include "support/surface.h"

namespace acrobat {

const std::vector<std::string>& engine_names() {
  static const std::vector<std::string> names = {"batched", "aot", "reference"};
  return names;
}

std::string engine_names_text() { return one_of(engine_names()); }

void check_engine_name(const std::string& name, const std::string& option) {
  for (const std::string& n : engine_names())
    if (n == name) return;
  throw UserError(option + " '" + name + "': expected " + engine_names_text());
}

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names = {scheduler_name(Scheduler::InlineDepth), scheduler_name(Scheduler::Depth),
                                                 scheduler_name(Scheduler::Agenda)};
  return names;
}

int thread_count(int threads) { return threads > 0 ? threads : default_threads(); }

std::unique_ptr<Engine> make_engine(const EngineSpec& spec, std::shared_ptr<const ir::Module> module,
                                    std::shared_ptr<const ParamStore> params) {
  check_engine_name(spec.engine);
  if (spec.max_steps < 0 || spec.max_steps > kMaxSteps)
    throw UserError(given("--max-steps", std::to_string(spec.max_steps)) + ": expected 0 (no limit) to " +
                    std::to_string(kMaxSteps));
  std::unique_ptr<Engine> engine;
  if (spec.engine == "reference") {
    engine = std::make_unique<ReferenceEngine>(std::move(module), std::move(params));
  } else if (spec.engine == "aot") {
    AotOptions o;
    o.object = spec.object;
    o.cache_dir = spec.cache_dir;
    o.threads = thread_count(spec.threads);
    o.scheduler = spec.scheduler;
    engine = std::make_unique<AotEngine>(std::move(module), std::move(params), o);
  } else {
    engine = std::make_unique<BatchedEngine>(std::move(module), std::move(params), spec.scheduler,
                                             thread_count(spec.threads));
  }
  engine->limit_steps(spec.max_steps);
  return engine;
}

}  // namespace acrobat
