// Test support: a scratch directory that disappears with the test.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace acrobat::test_support {

// A new empty directory, removed with its contents when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "acrobat_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string path(const std::string& name) const { return path_ + "/" + name; }
  // Writes `bytes` to a file `name` in the directory and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out << bytes;
    if (!out.flush()) throw std::runtime_error("cannot write " + path(name));
    return path(name);
  }

 private:
  std::string path_;
};

}  // namespace acrobat::test_support
