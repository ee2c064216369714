#include "lang/frontend.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lang/parser.h"

namespace acrobat {

std::shared_ptr<ast::Module> parse_model_text(const std::string& file, const std::string& text,
                                              const DimOverrides& overrides) {
  auto module = std::make_shared<ast::Module>();
  DiagnosticSink sink;
  parse_into(*module, "<prelude>", prelude_source(), sink);
  ACROBAT_ASSERT(!sink.has_errors(), "the prelude does not parse");
  parse_into(*module, file, text, sink);
  sink.throw_if_errors();
  check_module(*module, overrides, sink);
  return module;
}

std::shared_ptr<ast::Module> parse_model_file(const std::string& path,
                                              const DimOverrides& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open model file " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_text(path, text.str(), overrides);
}

}  // namespace acrobat
