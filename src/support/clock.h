// Timing of runs, stages and requests: one steady clock and one way to read an interval off it.
#pragma once

#include <chrono>

namespace acrobat {

using Clock = std::chrono::steady_clock;

// Seconds from `t` to now.
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace acrobat
