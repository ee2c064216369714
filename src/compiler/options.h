// What a compilation is asked for, and how a user's words for it read: `--set NAME=VALUE` dims and
// `--disable NAME,...` analyses, as the CLI and the benchmarks take them.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/plan.h"
#include "lang/check.h"

namespace acrobat {

struct CompileOptions {
  DimOverrides dims;           // --set K=V
  std::string print_after;     // a stage name from pipeline_stages(); "" for none
  std::ostream* dump = nullptr;
  analysis::AnalysisOptions analysis;  // ablation switches
};

// The analyses `--disable` switches off, in the order help texts list them.
const std::vector<std::string>& analysis_names();
// "specialise, reuse, ..., share" (for help texts and messages).
std::string analysis_names_text();

// NAME=VALUE overrides, each given separately or comma-separated (`D=768,NH=12`); VALUE a positive
// 64-bit integer. A UserError naming `--set` otherwise.
DimOverrides parse_sets(const std::vector<std::string>& sets);
// Analyses to switch off, for ablation runs; a UserError naming `--disable` for an unknown one.
analysis::AnalysisOptions parse_disable(const std::vector<std::string>& names);
// Both at once: what `--set` and `--disable` ask for.
CompileOptions compile_options(const std::vector<std::string>& sets, const std::vector<std::string>& disabled = {});

}  // namespace acrobat
