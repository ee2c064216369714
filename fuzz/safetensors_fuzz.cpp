// Fuzzes the safetensors reader: any bytes must give tensors or a UserError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/safetensors.h"
#include "support/diagnostics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> metadata;
  try {
    acrobat::io::parse_safetensors("fuzz.safetensors", bytes, &metadata);
  } catch (const acrobat::UserError&) {
  }
  return 0;
}
