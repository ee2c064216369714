// The ahead-of-time engine: runs a model compiled to a shared object by `acrobat compile` (or built
// and cached on first use). The generated host program records each instance's static blocks as
// nodes of the graph runtime both engines share (runtime/graph.h); its batches run through the
// generated batched kernel of their block.
#pragma once

#include <memory>
#include <string>

#include "engines/graph_engine.h"

namespace acrobat::aot {
struct AotModel;
}

namespace acrobat {

struct AotOptions {
  std::string object;     // a prebuilt shared object; "" to generate, build and cache
  std::string cache_dir;  // "" for codegen::default_cache_dir()
  int threads = 1;        // threads splitting each batched kernel
  Scheduler scheduler = Scheduler::InlineDepth;
  bool fibers = true;     // false: see GraphEngine's `fibers`
};

// How the engine got its shared object.
struct AotBuildInfo {
  std::string object_path;
  bool cached = false;
  double generate_seconds = 0;  // C++ generation
  double compile_seconds = 0;   // the system compiler (0 when cached)
  double load_seconds = 0;      // dlopen and checks
};

class AotEngine : public GraphEngine {
 public:
  // Generates the module's C++ and loads the matching object (from options.object, the cache, or a
  // fresh build). Throws UserError if a given object does not belong to this module (model, dims or
  // analyses differ) or was built for another runtime version.
  AotEngine(std::shared_ptr<const ir::Module> module, std::shared_ptr<const ParamStore> params,
            const AotOptions& options = {});
  ~AotEngine() override;

  const char* name() const override { return "aot"; }
  const AotBuildInfo& build_info() const { return build_; }

  struct State;

 private:
  std::unique_ptr<Program> make_program(Graph& graph, InstanceDriver& driver) override;

  AotBuildInfo build_;
  std::shared_ptr<void> library_;  // the loaded object (dlclose'd once no lane's program uses it)
  const aot::AotModel* model_ = nullptr;
};

}  // namespace acrobat
