#include "codegen/build.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/files.h"
#include "support/diagnostics.h"
#include "support/clock.h"

namespace acrobat::codegen {

namespace fs = std::filesystem;

std::string default_cache_dir() {
  if (const char* d = std::getenv("ACROBAT_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/acrobat";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/acrobat";
  return "/tmp/acrobat-cache-" + std::to_string(getuid());
}

#ifndef ACROBAT_AOT_SANITIZE_FLAGS
#define ACROBAT_AOT_SANITIZE_FLAGS ""
#define ACROBAT_AOT_DEFAULT_CXX "c++"
#endif

std::string system_compiler() {
  if (const char* c = std::getenv("ACROBAT_CXX"); c && *c) return c;
  if (const char* c = std::getenv("CXX"); c && *c) return c;
  return ACROBAT_AOT_DEFAULT_CXX;
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The building CPU as -march=native sees it: vendor, family, model and feature flags of the first
// processor in /proc/cpuinfo ("" where there is none).
const std::string& host_cpu() {
  static const std::string cpu = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, out;
    while (std::getline(in, line)) {
      if (line.empty()) break;  // the end of the first processor
      for (const char* key : {"vendor_id", "cpu family", "model\t", "flags"})
        if (line.rfind(key, 0) == 0) out += line + "\n";
    }
    return out;
  }();
  return cpu;
}

// The cache key covers everything that goes into the object: the generated source, the headers it
// includes from the source tree, the compiler command and the CPU that -march=native builds for (a
// cache directory shared by machines of different kinds keeps one object per kind).
std::string cache_key(const std::string& source, const std::string& command) {
  std::string all = source + "\n" + command + "\n" + host_cpu();
  for (const char* header : {"/acrobat/aot.h"}) all += read_all(std::string(ACROBAT_AOT_INCLUDE) + header);
  for (const char* header : {"/kernels/simd.h", "/kernels/vec_math.h"})
    all += read_all(std::string(ACROBAT_AOT_KERNELS) + header);
  return content_hash(all);
}

}  // namespace

BuiltObject build_shared_object(const GeneratedCpp& code, const std::string& cache_dir_arg) {
  std::string dir = cache_dir_arg.empty() ? default_cache_dir() : cache_dir_arg;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError("cannot create the compile cache directory " + dir + ": " + ec.message());
  BuiltObject out;
  const std::string sanitize = ACROBAT_AOT_SANITIZE_FLAGS;
  const std::string flags = (sanitize.empty() ? "" : " " + sanitize) +
                            " -std=c++20 -O3 -march=native -ffp-contract=off -fPIC -shared -w -I" +
                            io::shell_quote(ACROBAT_AOT_INCLUDE) + " -I" + io::shell_quote(ACROBAT_AOT_KERNELS);
  std::string base = dir + "/" + cache_key(code.source, system_compiler() + flags);
  out.path = base + ".so";
  if (fs::exists(out.path) && fs::exists(base + ".cpp") && read_all(base + ".cpp") == code.source) {
    out.cached = true;
    return out;
  }
  // Compile under temporary names, then rename: a concurrent build of the same model, or one that
  // is interrupted, never leaves a half-written object under the final name.
  std::string tmp = base + ".tmp" + std::to_string(getpid());
  io::write_file(tmp + ".cpp", code.source);
  std::string log = tmp + ".log";
  out.command = system_compiler() + flags + " -o " + io::shell_quote(tmp + ".so") + " " + io::shell_quote(tmp + ".cpp");
  auto t0 = Clock::now();
  int status = std::system((out.command + " > " + io::shell_quote(log) + " 2>&1").c_str());
  out.seconds = seconds_since(t0);
  if (status != 0) {
    std::string messages = read_all(log);
    if (messages.size() > 2000) messages = messages.substr(0, 2000) + "\n...";
    fs::remove(log, ec);
    throw UserError("compiling the generated C++ failed (" + out.command + "):\n" + messages);
  }
  fs::remove(log, ec);
  // The object first: a HASH.cpp is only ever next to its finished HASH.so.
  fs::rename(tmp + ".so", out.path, ec);
  if (!ec) fs::rename(tmp + ".cpp", base + ".cpp", ec);
  if (ec) throw UserError("cannot store the compiled model in " + dir + ": " + ec.message());
  return out;
}

}  // namespace acrobat::codegen
