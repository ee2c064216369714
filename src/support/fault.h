// Fault injection, so that the tests can make an internal error happen where only a bug could:
// with ACROBAT_INJECT_FAULT=POINT:K in the environment, the K-th pass through fault point POINT
// (counted from when the variable took that value, or was set again after a run without it) fails with an InternalError, as a broken
// ACROBAT_ASSERT there would. Unset (always, outside those tests), a run pays one getenv.
#pragma once

#include <string>

namespace acrobat {

// Whether ACROBAT_INJECT_FAULT is set at all: read once per run, so that the fault points of the
// run's loops cost nothing when it is not.
bool faults_injected();
// Counts one pass through `point`; throws InternalError when this is the pass the environment names.
void fault_point(const char* point, const char* file, int line);

}  // namespace acrobat

#define ACROBAT_FAULT_POINT(point) ::acrobat::fault_point(point, __FILE__, __LINE__)
