// Fuzzes the token-line reader: any text must give id sequences or a UserError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/tokens.h"
#include "support/diagnostics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    acrobat::io::parse_token_lines("fuzz.txt", text);
  } catch (const acrobat::UserError&) {
  }
  return 0;
}
