#include "support/diagnostics.h"

#include <cstdio>
#include <cstdlib>

namespace acrobat {

std::string SourceLoc::str() const {
  if (file.empty() && line == 0) return "";
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string Diagnostic::str() const {
  std::string where = loc.str();
  return where.empty() ? "error: " + message : where + ": error: " + message;
}

namespace {
std::string join(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) out += '\n';
    out += d.str();
  }
  return out;
}
}  // namespace

UserError::UserError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

UserError::UserError(SourceLoc loc, std::string message)
    : UserError(std::vector<Diagnostic>{Diagnostic{std::move(loc), std::move(message)}}) {}

UserError::UserError(std::string message) : UserError(SourceLoc{}, std::move(message)) {}

UserError for_instance(const UserError& e, size_t i) {
  std::vector<Diagnostic> ds = e.diagnostics();
  for (auto& d : ds) d.message = "instance " + std::to_string(i) + ": " + d.message;
  return UserError(std::move(ds));
}

void DiagnosticSink::error(SourceLoc loc, std::string message) {
  diagnostics_.push_back(Diagnostic{std::move(loc), std::move(message)});
}

void DiagnosticSink::throw_if_errors() {
  if (!diagnostics_.empty()) {
    std::vector<Diagnostic> out;
    out.swap(diagnostics_);
    throw UserError(std::move(out));
  }
}

SourceLoc loc_at_offset(const std::string& file, const std::string& text, size_t offset) {
  SourceLoc loc{file, 1, 1};
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.col = 1;
    } else {
      ++loc.col;
    }
  }
  return loc;
}

void internal_error(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "acrobat internal error at %s:%d: %s\n", file, line, what.c_str());
  std::abort();
}

}  // namespace acrobat
