#include "cli_options.h"

#include <charconv>
#include <sstream>

#include "support/diagnostics.h"

namespace acrobat::cli {

namespace {

// The whole of `text` as an integer of type T; false if it is not one or does not fit in T.
template <class T>
bool whole_number(const std::string& text, T& out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;  // from_chars takes no sign but '-'
  auto [ptr, ec] = std::from_chars(begin, end, out);
  return begin != end && ec == std::errc() && ptr == end;
}

}  // namespace

int64_t parse_number(const std::string& option, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  if (!whole_number(text, v) || v < min || v > max) bad_integer(option, text, min, max);
  return v;
}

uint64_t parse_seed(const std::string& option, const std::string& text) {
  uint64_t v = 0;
  if (!whole_number(text, v)) bad_integer(option, text, 0, UINT64_MAX);
  return v;
}

std::vector<int64_t> parse_number_list(const std::string& option, const std::string& text,
                                       int64_t min, int64_t max) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t v = 0;
    if (!whole_number(item, v) || v < min || v > max)
      throw UserError(option + " '" + text + "': expected a comma-separated list of integers from " +
                      std::to_string(min) + " to " + std::to_string(max));
    out.push_back(v);
  }
  if (out.empty())
    throw UserError(option + " '" + text + "': expected a comma-separated list of integers from " +
                    std::to_string(min) + " to " + std::to_string(max));
  return out;
}

}  // namespace acrobat::cli
