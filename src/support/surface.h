// The surface a user reaches acrobat through, and its words for the arguments: the CLI's flags
// (`--set H=64`, `--lr`) or the Python package's keyword arguments (`dims={'H': 64}`, `lr=`).
// Messages name an argument through argument()/given() with the CLI's flag as the key, so that one
// text serves both surfaces; the Python module switches the process to Surface::Python at import.
// Also the ranges of the numeric arguments, which both surfaces check.
#pragma once

#include <cstdint>
#include <string>

namespace acrobat {

enum class Surface { Cli, Python };
// The surface of this process (Cli unless set).
Surface surface();
void set_surface(Surface s);

// Ranges of the numeric arguments. The maxima are far beyond what a run needs; they keep a
// mistyped number from asking the machine for a million threads or an impossible batch.
inline constexpr int64_t kMaxThreads = 1024;
inline constexpr int64_t kMaxBatch = 1 << 20;
inline constexpr int64_t kMaxReps = 1000;
inline constexpr int64_t kMaxCount = int64_t{1} << 40;  // --limit, --show, --pytorch-limit
// An instance's step budget (Engine::limit_steps): --max-steps (0, none, by default for run and the
// Python package); a server's default stops a loop that never ends after some seconds.
inline constexpr int64_t kMaxSteps = int64_t{1} << 50;
inline constexpr int64_t kServeMaxSteps = 100'000'000;

// The argument the CLI calls `flag` in the current surface's words: "--lr" or "lr".
std::string argument(const std::string& flag);
// The argument with the value the user gave, as the user wrote it: "--lr '0'" or "lr=0",
// "--set 'X=3'" or "dims={'X': 3}", "--disable 'x'" or "disable=['x']".
std::string given(const std::string& flag, const std::string& value);
// The UserError for an integer argument out of [min, max] (or not an integer): "--batch '-1':
// expected an integer from 0 to 1048576" / "batch=-1: expected ...".
[[noreturn]] void bad_integer(const std::string& flag, const std::string& value, int64_t min, uint64_t max);

}  // namespace acrobat
