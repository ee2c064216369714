#include "support/diagnostics.h"


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

std::string one_of(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

namespace {
std::string instance_prefix(size_t i) { return "instance " + std::to_string(i) + ": "; }
}  // namespace

UserError for_instance(const UserError& e, size_t i) {
  std::vector<Diagnostic> ds = e.diagnostics();
  for (auto& d : ds) {
    // Marked again (a part's error numbered in the whole): one number, the latest.
    if (e.instance_ && d.message.rfind(instance_prefix(*e.instance_), 0) == 0)
      d.message.erase(0, instance_prefix(*e.instance_).size());
    d.message = instance_prefix(i) + d.message;
  }
  UserError out(std::move(ds));
  out.instance_ = i;
  return out;
}

UserError in_collection(const UserError& e, size_t first) {
  return e.instance() ? for_instance(e, first + *e.instance()) : e;
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

namespace {
// `path` from its last "src/", "include/" or "tools/" folder on: the place in the source tree, not
// where the tree was built (a server's error body shows no paths of its machine).
std::string source_path(const char* path) {
  const std::string p = path;
  size_t best = std::string::npos;
  for (const char* root : {"/src/", "/include/", "/tools/", "/python/"}) {
    const size_t at = p.rfind(root);
    if (at != std::string::npos && (best == std::string::npos || at > best)) best = at;
  }
  return best == std::string::npos ? p : p.substr(best + 1);
}
}  // namespace

InternalError::InternalError(const char* file, int line, const std::string& what)
    : std::logic_error("acrobat internal error at " + source_path(file) + ":" + std::to_string(line) + ": " +
                       what + " (a bug in acrobat, not in the model or its input)"),
      file_(source_path(file)),
      line_(line) {}

void internal_error(const char* file, int line, const std::string& what) {
  throw InternalError(file, line, what);
}

}  // namespace acrobat
