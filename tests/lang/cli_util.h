// Running the built `acrobat` from a test: exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>

#include "lang_test_util.h"

namespace acrobat::test {

struct CliResult {
  int status = -1;  // the exit status, or -1 if the process did not exit normally
  std::string out, err;
};

inline std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  q += '\'';
  return q;
}

// Runs the built `acrobat` with `args` (each quoted for the shell), after the shell commands in
// `prefix` (e.g. "ulimit -v 2000000; ").
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& prefix = "") {
  TempDir dir;
  std::string cmd = "(" + prefix + quoted(ACROBAT_CLI);
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) about "literal" + std::string.
  for (const auto& a : args) {
    cmd += ' ';
    cmd += quoted(a);
  }
  cmd += ") >";
  cmd += quoted(dir.path("out"));
  cmd += " 2>";
  cmd += quoted(dir.path("err"));
  int raw = std::system(cmd.c_str());
  CliResult r;
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  r.out = read_text(dir.path("out"));
  r.err = read_text(dir.path("err"));
  return r;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace acrobat::test
