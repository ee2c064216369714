// Fuzzes the Penn-Treebank reader: any text must give trees or a UserError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/ptb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const acrobat::io::PtbTree& tree : acrobat::io::parse_ptb_text("fuzz.txt", text))
      acrobat::io::ptb_leaves(tree);
  } catch (const acrobat::UserError&) {
  }
  return 0;
}
