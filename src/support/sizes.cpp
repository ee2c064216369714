#include "support/sizes.h"

#include <unistd.h>

#include <fmt/format.h>

namespace acrobat {

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return INT64_MAX;
  return checked_mul<int64_t>(pages, page_size).value_or(INT64_MAX);
}

std::string byte_size_str(int64_t bytes) {
  constexpr double kKiB = 1024.0;
  double b = static_cast<double>(bytes);
  if (b >= kKiB * kKiB * kKiB * kKiB) return fmt::format("{:.1f} TiB", b / (kKiB * kKiB * kKiB * kKiB));
  if (b >= kKiB * kKiB * kKiB) return fmt::format("{:.1f} GiB", b / (kKiB * kKiB * kKiB));
  if (b >= kKiB * kKiB) return fmt::format("{:.1f} MiB", b / (kKiB * kKiB));
  if (b >= kKiB) return fmt::format("{:.1f} KiB", b / kKiB);
  return fmt::format("{} bytes", bytes);
}

}  // namespace acrobat
