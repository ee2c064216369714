// Fuzzes the model front end and compiler: any text must end in a module or a UserError, never in a
// crash, a hang or a sanitizer report. A model that checks goes through every pass of the pipeline.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/pipeline.h"
#include "lang/frontend.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::shared_ptr<acrobat::ast::Module> module = acrobat::parse_model_text("fuzz.acr", text, {});
    acrobat::compile_checked(module, acrobat::CompileOptions{});
    acrobat::check_entry(*module, "main");
  } catch (const acrobat::UserError&) {
  }
  return 0;
}
