#include "support/fault.h"

#include <cstdlib>
#include <mutex>

#include "support/diagnostics.h"

namespace acrobat {

namespace {
std::mutex mutex;
std::string seen;   // the value of ACROBAT_INJECT_FAULT the count belongs to
long long passes = 0;
}  // namespace

bool faults_injected() {
  if (std::getenv("ACROBAT_INJECT_FAULT")) return true;
  std::lock_guard<std::mutex> lock(mutex);
  seen.clear();  // set again later, the count starts afresh
  passes = 0;
  return false;
}

void fault_point(const char* point, const char* file, int line) {
  std::lock_guard<std::mutex> lock(mutex);
  const char* env = std::getenv("ACROBAT_INJECT_FAULT");
  if (!env) return;
  const std::string spec = env;
  if (spec != seen) {
    seen = spec;
    passes = 0;
  }
  const size_t colon = spec.rfind(':');
  if (spec.substr(0, colon) != point) return;
  const long long k = colon == std::string::npos ? 1 : std::atoll(spec.c_str() + colon + 1);
  if (++passes == k)
    throw InternalError(file, line, std::string("fault injected at '") + point + "', pass " + std::to_string(k) +
                                        " (ACROBAT_INJECT_FAULT)");
}

}  // namespace acrobat
