// The command line's numbers, checked: each within its range (the `--set` and `--disable` words are
// read by compiler/options.h). Every problem is a UserError that names the option and says what it accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/surface.h"

namespace acrobat::cli {

// The ranges of the numeric options (kMaxThreads, kMaxBatch, ...) are support/surface.h's.
// `text` as an integer in [min, max]; otherwise "OPTION 'TEXT': expected an integer from MIN to MAX".
int64_t parse_number(const std::string& option, const std::string& text, int64_t min, int64_t max);
// A seed: any integer from 0 to 2^64-1.
uint64_t parse_seed(const std::string& option, const std::string& text);
// A comma-separated list of integers in [min, max] (bench's --batch and --threads).
std::vector<int64_t> parse_number_list(const std::string& option, const std::string& text,
                                       int64_t min, int64_t max);

}  // namespace acrobat::cli
