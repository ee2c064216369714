// Helpers shared by the io tests: paths into the source tree, a scratch directory, and checking
// that a reader fails with a UserError at an exact position.
#pragma once

#include "testing/temp_dir.h"
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/diagnostics.h"

namespace acrobat::io::test {

inline std::string source_path(const std::string& relative) {
  return std::string(ACROBAT_SOURCE_DIR) + "/" + relative;
}
inline std::string bad_file(const std::string& name) { return source_path("tests/io/bad/" + name); }

using TempDir = ::acrobat::test_support::TempDir;

// Checks that f() throws a UserError whose message starts with "<where>: error: " (just "error: "
// when `where` is empty) and contains `phrase`. Use as EXPECT_TRUE(fails_with(...)) so that a
// failure points at the caller.
template <class F>
::testing::AssertionResult fails_with(F&& f, const std::string& where, const std::string& phrase) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string message = e.what();
    const std::string prefix = where.empty() ? "error: " : where + ": error: ";
    if (message.rfind(prefix, 0) != 0)
      return ::testing::AssertionFailure()
             << "expected the message to start with \"" << prefix << "\", got:\n  " << message;
    if (message.find(phrase) == std::string::npos)
      return ::testing::AssertionFailure()
             << "expected the message to contain \"" << phrase << "\", got:\n  " << message;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw something other than UserError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace acrobat::io::test
