// Turning generated C++ into a loadable shared object with the system compiler, cached by content:
// the cache holds KEY.cpp and KEY.so, where KEY hashes the source, the runtime headers it includes
// and the compiler command; a request whose source matches a cached KEY.cpp byte for byte reuses
// KEY.so without compiling.
#pragma once

#include <string>

#include "codegen/emit_cpp.h"

namespace acrobat::codegen {

struct BuiltObject {
  std::string path;       // the shared object
  bool cached = false;    // found in the cache, not compiled
  double seconds = 0;     // time spent in the system compiler
  std::string command;    // the compiler command (empty when cached)
};

// $ACROBAT_CACHE_DIR, else $XDG_CACHE_HOME/acrobat, else $HOME/.cache/acrobat, else
// /tmp/acrobat-cache-UID.
std::string default_cache_dir();

// The compiler: $ACROBAT_CXX, else $CXX, else c++ (in a sanitizer build, the compiler that built
// acrobat).
std::string system_compiler();

// Builds (or finds) the shared object for `code` in `cache_dir` ("" for the default). A compiler
// failure throws UserError with the command and the compiler's first lines of output.
BuiltObject build_shared_object(const GeneratedCpp& code, const std::string& cache_dir = "");

}  // namespace acrobat::codegen
