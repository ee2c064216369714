#include "compiler/options.h"

#include <charconv>

#include "support/diagnostics.h"
#include "support/surface.h"

namespace acrobat {

namespace {

// Each analysis `--disable` names, with its switch.
struct Switch {
  const char* name;
  bool analysis::AnalysisOptions::*on;
};
constexpr Switch kSwitches[] = {
    {"specialise", &analysis::AnalysisOptions::specialise}, {"reuse", &analysis::AnalysisOptions::reuse},
    {"clone", &analysis::AnalysisOptions::clone},           {"ghosts", &analysis::AnalysisOptions::ghosts},
    {"phases", &analysis::AnalysisOptions::phases},         {"concurrent", &analysis::AnalysisOptions::concurrent},
    {"release", &analysis::AnalysisOptions::release},       {"share", &analysis::AnalysisOptions::share},
};

}  // namespace

const std::vector<std::string>& analysis_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Switch& s : kSwitches) out.push_back(s.name);
    return out;
  }();
  return names;
}

std::string analysis_names_text() { return one_of(analysis_names()); }

DimOverrides parse_sets(const std::vector<std::string>& sets) {
  DimOverrides out;
  for (const auto& s : sets) {
    const size_t eq = s.find('=');
    const std::string name = s.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : s.substr(eq + 1);
    int64_t v = 0;
    const char* begin = value.data();
    const char* end = begin + value.size();
    if (begin != end && *begin == '+') ++begin;  // from_chars takes no sign but '-'
    const auto [ptr, ec] = std::from_chars(begin, end, v);
    if (eq == std::string::npos || name.empty() || begin == end || ec != std::errc() || ptr != end || v <= 0)
      throw UserError(given("--set", s) + ": expected NAME=VALUE with a positive integer VALUE (at most " +
                      std::to_string(INT64_MAX) + ")");
    out[name] = v;
  }
  return out;
}

analysis::AnalysisOptions parse_disable(const std::vector<std::string>& names) {
  analysis::AnalysisOptions a;
  for (const auto& n : names) {
    const Switch* found = nullptr;
    for (const Switch& s : kSwitches)
      if (n == s.name) found = &s;
    if (!found) throw UserError(given("--disable", n) + ": expected " + analysis_names_text());
    a.*(found->on) = false;
  }
  return a;
}

CompileOptions compile_options(const std::vector<std::string>& sets, const std::vector<std::string>& disabled) {
  CompileOptions o;
  o.dims = parse_sets(sets);
  o.analysis = parse_disable(disabled);
  return o;
}

}  // namespace acrobat
