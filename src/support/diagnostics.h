// Source positions and user-facing errors. A user error names the place (file:line:col), what was
// expected and what was found; internal invariants use ACROBAT_ASSERT instead.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace acrobat {

// A 1-based line/column position in a named file. line == 0 means "no position known".
struct SourceLoc {
  std::string file;
  uint32_t line = 0;
  uint32_t col = 0;

  bool known() const { return line != 0; }
  // "file:line:col", "file" when only the file is known, or "" when nothing is.
  std::string str() const;
};

// A half-open range in one file; `begin` is what error messages point at.
struct Span {
  SourceLoc begin;
  uint32_t end_line = 0;
  uint32_t end_col = 0;
};

struct Diagnostic {
  SourceLoc loc;
  std::string message;  // "expected X, found Y", possibly followed by "\n  note: ..." lines
  std::string str() const;  // "file:line:col: error: message"
};

// Thrown for errors in user input (model files, weights, inputs, command-line flags). Carries one or
// more diagnostics; what() is all of them, one per line.
class UserError : public std::runtime_error {
 public:
  explicit UserError(std::vector<Diagnostic> diagnostics);
  UserError(SourceLoc loc, std::string message);
  explicit UserError(std::string message);  // no position: e.g. a command-line flag
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  // The instance of a run the error belongs to (for_instance), if any, and its diagnostics as they
  // were before for_instance numbered them.
  std::optional<size_t> instance() const { return instance_; }
  const std::vector<Diagnostic>& unnumbered() const { return instance_ ? unnumbered_ : diagnostics_; }

 private:
  friend UserError for_instance(const UserError& e, size_t i);
  std::vector<Diagnostic> diagnostics_;
  std::optional<size_t> instance_;
  std::vector<Diagnostic> unnumbered_;
};

// "a, b or c": the names a message or help text offers.
std::string one_of(const std::vector<std::string>& names);

// Marks a UserError as belonging to instance `i` of a run ("instance 7: ..."); an error that
// already names an instance is renumbered. Instances count from 0 everywhere (as Python and JSON
// arrays count): the first instance of a run is instance 0.
UserError for_instance(const UserError& e, size_t i);

// Collects several errors so that one run reports all it can find, then throws them together.
class DiagnosticSink {
 public:
  void error(SourceLoc loc, std::string message);
  bool has_errors() const { return !diagnostics_.empty(); }
  size_t count() const { return diagnostics_.size(); }
  // Throws UserError with everything collected so far, if anything was.
  void throw_if_errors();

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Converts a byte offset into `text` to a 1-based line/column (columns count bytes).
SourceLoc loc_at_offset(const std::string& file, const std::string& text, size_t offset);

// A broken invariant of acrobat itself (ACROBAT_ASSERT), not of the user's input: a bug in acrobat.
// It is thrown, never an abort, so that whoever drives the run decides what it costs: a server
// answers the requests of the failing batch with a 500 and keeps serving, Python raises
// acrobat.InternalError, the CLI prints it and exits with kInternalErrorExit.
class InternalError : public std::logic_error {
 public:
  // `file` as __FILE__ gives it; the message names it from the source tree down ("src/...").
  InternalError(const char* file, int line, const std::string& what);
  const std::string& file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string file_;
  int line_;
};

// The exit status of a command that met an internal error (sysexits.h's EX_SOFTWARE).
inline constexpr int kInternalErrorExit = 70;

[[noreturn]] void internal_error(const char* file, int line, const std::string& what);

}  // namespace acrobat

// An invariant of acrobat itself, not of the user's input: a failure is a bug in acrobat and throws
// InternalError.
#define ACROBAT_ASSERT(cond, msg)                                                  \
  do {                                                                             \
    if (!(cond)) ::acrobat::internal_error(__FILE__, __LINE__, std::string(#cond) + ": " + (msg)); \
  } while (0)
