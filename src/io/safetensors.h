// Safetensors weight files (https://github.com/huggingface/safetensors): reading F32/F64/F16/BF16
// tensors as float32, and writing float32 tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace acrobat::io {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;  // row-major; {} is a scalar
  std::vector<float> data;     // product(shape) elements
};

// Reads every tensor of the safetensors file `path`, converting F32, F64, F16 and BF16 data to
// float. If `metadata` is given it receives the "__metadata__" string map (empty if there is none).
// The file is validated completely: the header length, the JSON of the header (no duplicate
// names), each entry's dtype, shape and data_offsets, that the byte ranges match the shapes, lie in
// the data buffer and cover it exactly without overlaps or gaps. Throws UserError naming the file,
// the tensor and the byte offset in the file for anything wrong, and "cannot open ..." if the file
// cannot be read.
std::map<std::string, NamedTensor> read_safetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);
// The same for the contents of a file, named `path` in messages.
std::map<std::string, NamedTensor> parse_safetensors(
    const std::string& path, const std::string& bytes,
    std::map<std::string, std::string>* metadata = nullptr);

// Writes `tensors` as F32, in the given order and contiguously, with `metadata` as "__metadata__"
// (omitted when empty); the header is padded with spaces so that the data starts 8-byte aligned.
// Throws UserError for an empty, repeated or reserved ("__metadata__") name, a negative dimension,
// a shape whose element count differs from data.size(), strings that are not valid UTF-8, or if the
// file cannot be written.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace acrobat::io
