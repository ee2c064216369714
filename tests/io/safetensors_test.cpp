#include "io/safetensors.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include <gtest/gtest.h>

#include "io/files.h"
#include "io_test_util.h"

namespace acrobat::io {
namespace {

using test::fails_with;
using test::TempDir;

// Little-endian bytes of each value, built by hand (not with the code under test).
template <class T>
std::string le_bytes(std::initializer_list<T> values) {
  std::string out;
  for (T value : values) {
    uint64_t bits = 0;
    if constexpr (std::is_floating_point_v<T>) {
      using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
      bits = std::bit_cast<U>(value);
    } else {
      bits = static_cast<uint64_t>(value);
    }
    for (size_t i = 0; i < sizeof(T); ++i)
      out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  }
  return out;
}

// A safetensors file: the u64 header length, the header, the data buffer.
std::string st_file(const std::string& header, const std::string& buffer) {
  return le_bytes<uint64_t>({header.size()}) + header + buffer;
}

TEST(Safetensors, RoundTripsF32) {
  TempDir dir;
  const std::string path = dir.path("m.safetensors");
  const std::vector<NamedTensor> tensors = {
      {"layer.weight", {2, 3}, {1.5f, -2.f, 0.f, 3.25f, 1e-30f, -7.f}},
      {"layer.bias", {3}, {0.1f, std::numeric_limits<float>::infinity(), -0.f}},
      {"scale", {}, {42.f}},
      {"empty", {0, 4}, {}},
  };
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "héllo"}});

  const std::string bytes = read_file(path);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i)
    header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + header_size) % 8, 0u) << "the data must start 8-byte aligned";
  EXPECT_EQ(bytes.size(), 8 + header_size + 4 * (6 + 3 + 1));

  std::map<std::string, std::string> metadata;
  std::map<std::string, NamedTensor> read = read_safetensors(path, &metadata);
  ASSERT_EQ(read.size(), tensors.size());
  for (const NamedTensor& t : tensors) {
    ASSERT_TRUE(read.count(t.name)) << t.name;
    const NamedTensor& r = read.at(t.name);
    EXPECT_EQ(r.name, t.name);
    EXPECT_EQ(r.shape, t.shape);
    ASSERT_EQ(r.data.size(), t.data.size());
    for (size_t i = 0; i < t.data.size(); ++i)
      EXPECT_EQ(std::bit_cast<uint32_t>(r.data[i]), std::bit_cast<uint32_t>(t.data[i]))
          << t.name << "[" << i << "]";
  }
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "héllo"}}));

  write_safetensors(path, {});  // no tensors, no metadata
  EXPECT_TRUE(read_safetensors(path, &metadata).empty());
  EXPECT_TRUE(metadata.empty());
}

TEST(Safetensors, ConvertsF64F16Bf16) {
  TempDir dir;
  // Tensors in the buffer in an order different from the header's (which is sorted by name), and
  // the header is not padded, so F64 data starts unaligned.
  const std::string header = R"({"h":{"dtype":"F16","shape":[2,5],"data_offsets":[0,20]},)"
                             R"("d":{"dtype":"F64","shape":[3],"data_offsets":[20,44]},)"
                             R"("b":{"dtype":"BF16","shape":[1,3],"data_offsets":[44,50]},)"
                             R"("f":{"dtype":"F32","shape":[],"data_offsets":[50,54]}})";
  const std::string buffer =
      le_bytes<uint16_t>(
          {0x3C00, 0xC000, 0x3555, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8000}) +
      le_bytes<double>({0.1, -1e-3, -std::numeric_limits<double>::infinity()}) +
      le_bytes<uint16_t>({0x3F80, 0xC040, 0x4049}) + le_bytes<float>({-8.5f});
  const std::string path = dir.write("mixed.safetensors", st_file(header, buffer));
  std::map<std::string, NamedTensor> t = read_safetensors(path);
  ASSERT_EQ(t.size(), 4u);

  const NamedTensor& h = t.at("h");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 5}));
  ASSERT_EQ(h.data.size(), 10u);
  EXPECT_EQ(h.data[0], 1.0f);
  EXPECT_EQ(h.data[1], -2.0f);
  EXPECT_EQ(h.data[2], 0.333251953125f);
  EXPECT_EQ(h.data[3], std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(h.data[4], std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(h.data[5], 65504.0f);                  // largest finite
  EXPECT_EQ(h.data[6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(h.data[7], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(h.data[8]));
  EXPECT_EQ(h.data[9], 0.0f);
  EXPECT_TRUE(std::signbit(h.data[9]));

  const NamedTensor& d = t.at("d");
  ASSERT_EQ(d.data.size(), 3u);
  EXPECT_EQ(d.data[0], 0.1f);
  EXPECT_EQ(d.data[1], -1e-3f);
  EXPECT_EQ(d.data[2], -std::numeric_limits<float>::infinity());

  const NamedTensor& b = t.at("b");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(b.data, (std::vector<float>{1.0f, -3.0f, 3.140625f}));

  EXPECT_EQ(t.at("f").shape, std::vector<int64_t>{});
  EXPECT_EQ(t.at("f").data, std::vector<float>{-8.5f});
}

TEST(Safetensors, WriteRejectsInconsistentTensors) {
  TempDir dir;
  const std::string path = dir.path("w.safetensors");
  EXPECT_TRUE(fails_with(
      [&] {
        write_safetensors(path, {{"a", {2}, {1, 2}}, {"a", {1}, {3}}});
      },
      path, "cannot write tensor 'a': another tensor has the same name"));
  EXPECT_TRUE(fails_with(
      [&] {
        write_safetensors(path, {{"a", {2, 2}, {1, 2, 3}}});
      },
      path, "cannot write tensor 'a': shape [2, 2] does not match the 3 elements of data"));
  EXPECT_TRUE(fails_with(
      [&] {
        write_safetensors(path, {{"a", {-1, -2}, {1, 2}}});
      },
      path, "shape [-1, -2] has a negative dimension"));
  EXPECT_TRUE(fails_with(
      [&] {
        write_safetensors(path, {{"__metadata__", {}, {1}}});
      },
      path, "the name is empty or reserved"));
  EXPECT_TRUE(fails_with(
      [&] {
        write_safetensors(path, {{"a\xFF", {}, {1}}});
      },
      path, "not valid UTF-8"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A malformed file built in the test, and what reading it must report.
struct BadSafetensors {
  const char* name;
  std::string bytes;
  std::string phrase;  // the message after "<path>: error: " must contain this
};

// A one-tensor header around `entry` (the JSON object describing tensor "w").
std::string one_tensor(const std::string& entry) { return R"({"w":)" + entry + "}"; }

std::vector<BadSafetensors> bad_safetensors() {
  const std::string four = le_bytes<float>({1.f});
  const std::string eight = le_bytes<float>({1.f, 2.f});
  return {
      {"too_short", "\x01\x02\x03",
       "expected a safetensors file starting with an 8-byte header length, found a file of 3 "
       "bytes"},
      {"header_too_long", le_bytes<uint64_t>({1000}) + "{}",
       "header length 1000 (file bytes 0-7) is larger than the 2 bytes that follow it"},
      {"header_length_max", le_bytes<uint64_t>({UINT64_MAX}) + "{}",
       "header length 18446744073709551615 (file bytes 0-7) is larger than the 2 bytes that follow "
       "it"},
      {"invalid_json", st_file(R"({"a": {"dtype": "F32",, }})", ""),
       "header at file byte 30: invalid JSON: unexpected ','; expected string literal (while "
       "parsing object key)"},
      {"header_not_object", st_file("[1]", ""),
       "expected the header to be a JSON object, found array"},
      {"duplicate_name",
       st_file(
           R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           eight),
       "header at file byte 62: invalid JSON: duplicate key \"w\" in an object (first at file byte "
       "9)"},
      {"entry_not_object", st_file(one_tensor("3"), ""),
       "tensor 'w': expected an object with dtype, shape and data_offsets, found integer"},
      {"missing_dtype", st_file(one_tensor(R"({"shape":[1],"data_offsets":[0,4]})"), four),
       "tensor 'w': missing \"dtype\""},
      {"missing_offsets", st_file(one_tensor(R"({"dtype":"F32","shape":[1]})"), four),
       "tensor 'w': missing \"data_offsets\""},
      {"unexpected_key",
       st_file(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"stride":[1]})"),
               four),
       "tensor 'w': unexpected key \"stride\"; expected only dtype, shape and data_offsets"},
      {"unknown_dtype",
       st_file(one_tensor(R"({"dtype":"I8","shape":[4],"data_offsets":[0,4]})"), four),
       "tensor 'w': unsupported dtype \"I8\"; expected \"F32\", \"F64\", \"F16\" or \"BF16\""},
      {"dtype_not_string",
       st_file(one_tensor(R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})"), four),
       "tensor 'w': unsupported dtype 4"},
      {"shape_not_array",
       st_file(one_tensor(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"), four),
       "tensor 'w': expected shape to be an array of integers, found \"1\""},
      {"negative_dim",
       st_file(one_tensor(R"({"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]})"),
               std::string(24, '\0')),
       "tensor 'w': expected shape[1] to be a non-negative integer, found the negative number -3"},
      {"fractional_dim",
       st_file(one_tensor(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,4]})"), four),
       "tensor 'w': expected shape[0] to be a non-negative integer, found 2.5"},
      {"huge_dim",
       st_file(one_tensor(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]})"),
               four),
       "tensor 'w': shape[0] is 18446744073709551615, more than the maximum 9223372036854775807"},
      {"shape_overflow",
       st_file(
           one_tensor(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
           four),
       "tensor 'w': shape [4294967296, 4294967296] has too many elements: the byte size overflows "
       "64 bits"},
      {"shape_mismatch",
       st_file(one_tensor(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,20]})"),
               std::string(20, '\0')),
       "tensor 'w': shape [2, 3] of F32 needs 24 bytes, but data_offsets [0, 20] span 20 bytes"},
      {"offsets_arity",
       st_file(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[4]})"), four),
       "tensor 'w': expected data_offsets to be an array [begin, end], found an array of 1 "
       "elements"},
      {"offsets_reversed",
       st_file(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"), eight),
       "tensor 'w': data_offsets [8, 4] end before they begin"},
      {"offsets_negative",
       st_file(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"), four),
       "tensor 'w': expected data_offsets[0] to be a non-negative integer, found the negative "
       "number -4"},
      {"offsets_past_end",
       st_file(one_tensor(R"({"dtype":"F32","shape":[100],"data_offsets":[0,400]})"), eight),
       "tensor 'w': data_offsets [0, 400] go past the end of the data buffer, which has 8 bytes "
       "(file bytes [66, 74))"},
      {"overlap",
       st_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           std::string(12, '\0')),
       "tensor 'b': data_offsets [4, 12] overlap those of tensor 'a' [0, 8]"},
      {"gap",
       st_file(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
           std::string(12, '\0')),
       "tensor 'b': data_offsets [8, 12] leave a gap: buffer bytes [4, 8) (file bytes [120, 124)) "
       "belong to no tensor"},
      {"trailing_bytes",
       st_file(one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), eight),
       "the data buffer has 4 bytes after the end of the last tensor (buffer bytes [4, 8), file "
       "bytes [66, 70))"},
      {"empty_name", st_file(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four),
       "the header has a tensor with an empty name"},
      {"metadata_not_string", st_file(R"({"__metadata__":{"k":1}})", ""),
       "\"__metadata__\" entry \"k\": expected a string, found 1"},
      {"metadata_not_object", st_file(R"({"__metadata__":[]})", ""),
       "expected \"__metadata__\" to be an object of strings, found array"},
      {"f64_out_of_range",
       st_file(one_tensor(R"({"dtype":"F64","shape":[2],"data_offsets":[0,16]})"),
               le_bytes<double>({1.0, 1e300})),
       "tensor 'w': element 1 (file byte 71) is 1e+300, outside the range of float32"},
  };
}

TEST(Safetensors, RejectsMalformedFiles) {
  TempDir dir;
  for (const BadSafetensors& bad : bad_safetensors()) {
    const std::string path = dir.write(std::string(bad.name) + ".safetensors", bad.bytes);
    EXPECT_TRUE(fails_with([&] { read_safetensors(path); }, path, bad.phrase)) << bad.name;
  }
}

}  // namespace
}  // namespace acrobat::io
