// The command line's numbers, checked: each within its range (the `--set` and `--disable` words are
// read by compiler/options.h). Every problem is a UserError that names the option and says what it accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>


namespace acrobat::cli {

// Ranges of the numeric options. The maxima are far beyond what a run needs; they keep a mistyped
// number from asking the machine for a million threads or an impossible batch.
inline constexpr int64_t kMaxThreads = 1024;
inline constexpr int64_t kMaxBatch = 1 << 20;
inline constexpr int64_t kMaxReps = 1000;
inline constexpr int64_t kMaxCount = int64_t{1} << 40;  // --limit, --show, --pytorch-limit

// `text` as an integer in [min, max]; otherwise "OPTION 'TEXT': expected an integer from MIN to MAX".
int64_t parse_number(const std::string& option, const std::string& text, int64_t min, int64_t max);
// A seed: any integer from 0 to 2^64-1.
uint64_t parse_seed(const std::string& option, const std::string& text);
// A comma-separated list of integers in [min, max] (bench's --batch and --threads).
std::vector<int64_t> parse_number_list(const std::string& option, const std::string& text,
                                       int64_t min, int64_t max);

}  // namespace acrobat::cli
