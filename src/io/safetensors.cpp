#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/files.h"
#include "io/json_lines.h"
#include "support/diagnostics.h"
#include "support/sizes.h"

namespace acrobat::io {

namespace {

using nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr size_t kPrefixBytes = 8;  // the little-endian u64 header length

enum class DType { F32, F64, F16, BF16 };

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {{DType::F32, "F32", 4},
                                 {DType::F64, "F64", 8},
                                 {DType::F16, "F16", 2},
                                 {DType::BF16, "BF16", 2}};

// A tensor entry of the header, checked on its own (not yet against the other entries).
struct Entry {
  std::string name;
  const DTypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data buffer
  uint64_t end = 0;
};

[[noreturn]] void fail(const std::string& path, std::string message) {
  throw UserError(SourceLoc{path}, std::move(message));
}

uint64_t load_le(const char* p, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = bytes; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

void store_le(char* p, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i, value >>= 8) p[i] = static_cast<char>(value & 0xFF);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  const uint32_t bits = exponent == 0x1F ? sign | 0x7F800000u | (mantissa << 13)  // inf / NaN
                                         : sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

// Converts `count` elements at `p` to float. Returns the index of the first F64 element that is
// finite but beyond float range (converting it would be undefined), or nullopt.
std::optional<size_t> convert(const DTypeInfo& dtype, const char* p, size_t count, float* out) {
  for (size_t i = 0; i < count; ++i, p += dtype.size) {
    switch (dtype.dtype) {
      case DType::F32: out[i] = std::bit_cast<float>(static_cast<uint32_t>(load_le(p, 4))); break;
      case DType::F64: {
        const double d = std::bit_cast<double>(load_le(p, 8));
        if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max()) return i;
        out[i] = static_cast<float>(d);
        break;
      }
      case DType::F16: out[i] = half_to_float(static_cast<uint16_t>(load_le(p, 2))); break;
      case DType::BF16:
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(load_le(p, 2)) << 16);
        break;
    }
  }
  return std::nullopt;
}

// A JSON value for "found ...": scalars as written, containers by type.
std::string describe(const json& value) {
  if (value.is_array()) return fmt::format("an array of {} elements", value.size());
  if (value.is_object()) return "an object";
  std::string text = value.dump();
  return text.size() > 40 ? quote(text) : text;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// product(shape) * element_size, or nullopt if that overflows 64 bits.
std::optional<uint64_t> byte_count(const std::vector<int64_t>& shape, uint64_t element_size) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::optional<uint64_t> elements = checked_product<uint64_t>(shape);
  return elements ? checked_mul(*elements, element_size) : std::nullopt;
}

// Reports errors about one tensor as "FILE: error: <what> 'NAME': ...".
struct TensorContext {
  const std::string& path;
  const std::string& name;
  std::string_view what = "tensor";
  [[noreturn]] void fail(std::string message) const {
    io::fail(path, fmt::format("{} {}: {}", what, quote(name), message));
  }
};

// `value` as a non-negative integer that fits int64; `what` names it in the message.
uint64_t non_negative(const TensorContext& tensor, const json& value, std::string_view what) {
  if (value.is_number_integer() && !value.is_number_unsigned())
    tensor.fail(
        fmt::format("expected {} to be a non-negative integer, found the negative number {}", what,
                    value.get<int64_t>()));
  if (!value.is_number_unsigned())
    tensor.fail(
        fmt::format("expected {} to be a non-negative integer, found {}", what, describe(value)));
  const auto n = value.get<uint64_t>();
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    tensor.fail(fmt::format("{} is {}, more than the maximum {}", what, n,
                            std::numeric_limits<int64_t>::max()));
  return n;
}

Entry parse_entry(const std::string& path, const std::string& name, const json& value) {
  if (name.empty()) fail(path, "the header has a tensor with an empty name");
  const TensorContext tensor{path, name};
  if (!value.is_object())
    tensor.fail(fmt::format("expected an object with dtype, shape and data_offsets, found {}",
                            json_type_name(value)));
  for (const auto& [key, field] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      tensor.fail(fmt::format("unexpected key {}; expected only dtype, shape and data_offsets",
                              json(key).dump()));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) tensor.fail(fmt::format("missing \"{}\"", key));
  }

  Entry entry;
  entry.name = name;
  const json& dtype = value.at("dtype");
  if (dtype.is_string()) {
    for (const DTypeInfo& info : kDTypes) {
      if (dtype.get_ref<const std::string&>() == info.name) entry.dtype = &info;
    }
  }
  if (!entry.dtype)
    tensor.fail(fmt::format("unsupported dtype {}; expected \"F32\", \"F64\", \"F16\" or \"BF16\"",
                            describe(dtype)));

  const json& shape = value.at("shape");
  if (!shape.is_array())
    tensor.fail(
        fmt::format("expected shape to be an array of integers, found {}", describe(shape)));
  for (size_t i = 0; i < shape.size(); ++i)
    entry.shape.push_back(
        static_cast<int64_t>(non_negative(tensor, shape[i], fmt::format("shape[{}]", i))));

  const json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    tensor.fail(fmt::format("expected data_offsets to be an array [begin, end], found {}",
                            describe(offsets)));
  entry.begin = non_negative(tensor, offsets[0], "data_offsets[0]");
  entry.end = non_negative(tensor, offsets[1], "data_offsets[1]");
  if (entry.begin > entry.end)
    tensor.fail(fmt::format("data_offsets [{}, {}] end before they begin", entry.begin, entry.end));

  const std::optional<uint64_t> bytes = byte_count(entry.shape, entry.dtype->size);
  if (!bytes)
    tensor.fail(fmt::format("shape {} has too many elements: the byte size overflows 64 bits",
                            shape_str(entry.shape)));
  if (*bytes != entry.end - entry.begin)
    tensor.fail(
        fmt::format("shape {} of {} needs {} bytes, but data_offsets [{}, {}] span {} bytes",
                    shape_str(entry.shape), entry.dtype->name, *bytes, entry.begin, entry.end,
                    entry.end - entry.begin));
  return entry;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& value) {
  if (!value.is_object())
    fail(path, fmt::format("expected \"{}\" to be an object of strings, found {}", kMetadataKey,
                           json_type_name(value)));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, field] : value.items()) {
    if (!field.is_string())
      fail(path, fmt::format("\"{}\" entry {}: expected a string, found {}", kMetadataKey,
                             json(key).dump(), describe(field)));
    metadata.emplace(key, field.get<std::string>());
  }
  return metadata;
}

// Checks that the entries' byte ranges lie in the buffer and tile it: no overlaps, gaps or extra
// bytes. `data_start` is the buffer's offset in the file, for messages.
void check_layout(const std::string& path, std::vector<const Entry*> entries, uint64_t buffer_size,
                  uint64_t data_start) {
  for (const Entry* e : entries) {
    if (e->end > buffer_size)
      fail(path,
           fmt::format("tensor {}: data_offsets [{}, {}] go past the end of the data buffer, which "
                       "has {} bytes (file bytes [{}, {}))",
                       quote(e->name), e->begin, e->end, buffer_size, data_start,
                       data_start + buffer_size));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t covered = 0;  // the buffer [0, covered) belongs to the tensors seen so far
  const Entry* last = nullptr;
  for (const Entry* e : entries) {
    if (e->begin < covered)
      fail(path, fmt::format("tensor {}: data_offsets [{}, {}] overlap those of tensor {} [{}, {}]",
                             quote(e->name), e->begin, e->end, quote(last->name), last->begin,
                             last->end));
    if (e->begin > covered)
      fail(path,
           fmt::format(
               "tensor {}: data_offsets [{}, {}] leave a gap: buffer bytes [{}, {}) (file bytes "
               "[{}, {})) belong to no tensor",
               quote(e->name), e->begin, e->end, covered, e->begin, data_start + covered,
               data_start + e->begin));
    if (e->end > covered) {
      covered = e->end;
      last = e;
    }
  }
  if (covered != buffer_size)
    fail(
        path,
        fmt::format(
            "the data buffer has {} bytes after the end of the last tensor (buffer bytes [{}, {}), "
            "file bytes [{}, {})) that belong to no tensor",
            buffer_size - covered, covered, buffer_size, data_start + covered,
            data_start + buffer_size));
}

}  // namespace

std::map<std::string, NamedTensor> read_safetensors(const std::string& path,
                                                    std::map<std::string, std::string>* metadata) {
  return parse_safetensors(path, read_file(path), metadata);
}

std::map<std::string, NamedTensor> parse_safetensors(const std::string& path,
                                                     const std::string& bytes,
                                                     std::map<std::string, std::string>* metadata) {
  if (bytes.size() < kPrefixBytes)
    fail(path,
         fmt::format(
             "expected a safetensors file starting with an 8-byte header length, found a file "
             "of {} bytes",
             bytes.size()));
  const uint64_t header_size = load_le(bytes.data(), kPrefixBytes);
  if (header_size > bytes.size() - kPrefixBytes)
    fail(path,
         fmt::format("header length {} (file bytes 0-7) is larger than the {} bytes that follow it",
                     header_size, bytes.size() - kPrefixBytes));

  const std::string_view header_text(bytes.data() + kPrefixBytes, header_size);
  json header;
  auto where = [](size_t offset) { return fmt::format("file byte {}", kPrefixBytes + offset); };
  if (auto error = parse_json_strict(header_text, header, where))
    fail(path,
         fmt::format("header at file byte {}: {}", kPrefixBytes + error->offset, error->message));
  if (!header.is_object())
    fail(path,
         fmt::format("expected the header to be a JSON object, found {}", json_type_name(header)));

  if (metadata) metadata->clear();
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      std::map<std::string, std::string> parsed = parse_metadata(path, value);
      if (metadata) *metadata = std::move(parsed);
    } else {
      entries.push_back(parse_entry(path, name, value));
    }
  }

  const uint64_t data_start = kPrefixBytes + header_size;
  const char* buffer = bytes.data() + data_start;
  std::vector<const Entry*> layout;
  for (const Entry& e : entries) layout.push_back(&e);
  check_layout(path, std::move(layout), bytes.size() - data_start, data_start);

  std::map<std::string, NamedTensor> tensors;
  for (Entry& e : entries) {
    NamedTensor& t = tensors[e.name];
    t.name = e.name;
    t.shape = std::move(e.shape);
    const size_t count = (e.end - e.begin) / e.dtype->size;
    t.data.resize(count);
    if (std::optional<size_t> bad = convert(*e.dtype, buffer + e.begin, count, t.data.data())) {
      const uint64_t at = data_start + e.begin + *bad * e.dtype->size;
      TensorContext{path, e.name}.fail(
          fmt::format("element {} (file byte {}) is {}, outside the range of float32", *bad, at,
                      std::bit_cast<double>(load_le(bytes.data() + at, 8))));
    }
  }
  return tensors;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  std::set<std::string_view> names;
  for (const NamedTensor& t : tensors) {
    const TensorContext tensor{path, t.name, "cannot write tensor"};
    if (t.name.empty() || t.name == kMetadataKey) tensor.fail("the name is empty or reserved");
    if (!names.insert(t.name).second) tensor.fail("another tensor has the same name");
    for (int64_t dim : t.shape) {
      if (dim < 0)
        tensor.fail(fmt::format("shape {} has a negative dimension", shape_str(t.shape)));
    }
    const std::optional<uint64_t> bytes = byte_count(t.shape, sizeof(float));
    if (!bytes || *bytes != t.data.size() * sizeof(float))
      tensor.fail(fmt::format("shape {} does not match the {} elements of data", shape_str(t.shape),
                              t.data.size()));
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
  }

  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const json::type_error& e) {
    fail(path, fmt::format("cannot write: a tensor name or metadata string is not valid UTF-8 ({})",
                           e.what()));
  }
  header_text.append((8 - (kPrefixBytes + header_text.size()) % 8) % 8, ' ');  // align the data

  std::string out(kPrefixBytes + header_text.size() + offset, '\0');
  store_le(out.data(), header_text.size(), kPrefixBytes);
  std::copy(header_text.begin(), header_text.end(), out.begin() + kPrefixBytes);
  char* p = out.data() + kPrefixBytes + header_text.size();
  for (const NamedTensor& t : tensors) {
    for (float value : t.data) {
      store_le(p, std::bit_cast<uint32_t>(value), sizeof(float));
      p += sizeof(float);
    }
  }
  write_file(path, out);
}

}  // namespace acrobat::io
