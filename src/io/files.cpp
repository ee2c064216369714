#include "io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace acrobat::io {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports whether that succeeded (a failed close can mean lost writes).
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

[[noreturn]] void fail_errno(const char* what, const std::string& path, int err) {
  throw UserError(fmt::format("cannot {} {}: {}", what, path, std::strerror(err)));
}

// A forward iterator over a char buffer that remembers the furthest position dereferenced, so
// that callbacks of nlohmann's parser can tell where the lexer is.
class TrackingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator() = default;
  TrackingIterator(const char* p, const char** furthest) : p_(p), furthest_(furthest) {}
  reference operator*() const {
    if (p_ + 1 > *furthest_) *furthest_ = p_ + 1;
    return *p_;
  }
  TrackingIterator& operator++() {
    ++p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator old = *this;
    ++p_;
    return old;
  }
  bool operator==(const TrackingIterator& other) const { return p_ == other.p_; }

 private:
  const char* p_ = nullptr;
  const char** furthest_ = nullptr;
};

// Where the string literal ending just before `end` (i.e. text[end-1] is its closing quote)
// starts: the nearest earlier '"' that is not escaped by an odd number of backslashes.
size_t string_literal_start(std::string_view text, size_t end) {
  size_t i = end - 1;  // the closing quote
  while (i > 0) {
    --i;
    if (text[i] != '"') continue;
    size_t backslashes = 0;
    while (backslashes < i && text[i - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return i;
  }
  return 0;
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 4: syntax
// error while parsing value - invalid literal; last read: 'tru'". Keeps what comes after the
// position, as "invalid JSON: invalid literal; last read: 'tru'" (plus "(while parsing object
// key)" and the like when the context says more than "value").
std::string trim_parse_error(const std::string& what) {
  std::string_view rest = what;
  if (size_t colon = rest.find(": "); rest.starts_with("[json.exception.") && colon != rest.npos)
    rest.remove_prefix(colon + 2);
  constexpr std::string_view kSyntax = "syntax error while parsing ";
  std::string context;
  if (rest.starts_with(kSyntax)) {
    size_t dash = rest.find(" - ");
    if (dash != rest.npos) {
      context = std::string(rest.substr(kSyntax.size(), dash - kSyntax.size()));
      rest.remove_prefix(dash + 3);
    }
  }
  std::string out = "invalid JSON: " + std::string(rest);
  if (!context.empty() && context != "value") out += " (while parsing " + context + ")";
  return out;
}

// The length of the well-formed UTF-8 sequence starting at text[i] (a byte >= 0x80), or 0.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xBF)) return 0;
  }
  return n;
}

}  // namespace

std::string read_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno("open", path, errno);
  if (S_ISDIR(st.st_mode)) fail_errno("open", path, EISDIR);

  std::string bytes;
  if (S_ISREG(st.st_mode) && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("read", path, errno);
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  return bytes;
}

void write_file(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) fail_errno("open for writing", tmp, errno);
    while (!bytes.empty()) {
      ssize_t n = ::write(fd.get(), bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::unlink(tmp.c_str());
        fail_errno("write", tmp, err);
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    if (!fd.close()) {
      int err = errno;
      ::unlink(tmp.c_str());
      fail_errno("write", tmp, err);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail_errno("write", path, err);
  }
}

std::vector<TextLine> split_lines(const std::string& text, const std::string& file) {
  std::string_view rest = text;
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);
  std::vector<TextLine> lines;
  uint32_t number = 0;
  while (!rest.empty()) {
    if (number == std::numeric_limits<uint32_t>::max())
      throw UserError(SourceLoc{file}, "file has more than 4294967295 lines");
    size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == rest.npos ? rest.size() : newline + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.push_back(TextLine{line, ++number});
  }
  return lines;
}

SourceLoc line_loc(const std::string& file, const TextLine& line, size_t offset) {
  constexpr size_t kMaxCol = std::numeric_limits<uint32_t>::max();
  return SourceLoc{file, line.number,
                   static_cast<uint32_t>(offset >= kMaxCol ? kMaxCol : offset + 1)};
}

std::string quote(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  size_t i = 0;
  while (i < text.size() && i < kMax) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if (size_t n = utf8_sequence_length(text, i); n > 0) {
        if (i + n > kMax) break;  // do not cut a character in half
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
    }
    if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  if (i < text.size()) out += "...";
  return out + "'";
}

std::optional<JsonError> parse_json_strict(std::string_view text, nlohmann::json& out,
                                           const std::function<std::string(size_t)>& where) {
  using Event = nlohmann::json::parse_event_t;
  const char* furthest = text.data();
  auto offset_now = [&] { return static_cast<size_t>(furthest - text.data()); };

  // Thrown from the callback to stop parsing at the first semantic error.
  struct Stop {
    JsonError error;
  };
  std::vector<std::map<std::string, size_t>> open_objects;  // key -> offset of its opening quote
  size_t depth = 0;
  auto callback = [&](int, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (++depth > kMaxJsonDepth)
          throw Stop{{offset_now() - 1, fmt::format("invalid JSON: arrays and objects nested more "
                                                    "than {} deep",
                                                    kMaxJsonDepth)}};
        if (event == Event::object_start) open_objects.emplace_back();
        break;
      case Event::object_end:
      case Event::array_end:
        --depth;
        if (event == Event::object_end) open_objects.pop_back();
        break;
      case Event::key: {
        size_t at = string_literal_start(text, offset_now());
        auto [it, inserted] = open_objects.back().emplace(parsed.get<std::string>(), at);
        if (!inserted)
          throw Stop{{at, fmt::format("invalid JSON: duplicate key {} in an object (first at {})",
                                      parsed.dump(), where(it->second))}};
        break;
      }
      case Event::value: break;
    }
    return true;
  };

  try {
    out = nlohmann::json::parse(TrackingIterator(text.data(), &furthest),
                                TrackingIterator(text.data() + text.size(), &furthest), callback);
  } catch (Stop& stop) {
    return std::move(stop.error);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points one past the end for "unexpected end of input".
    size_t offset = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
    return JsonError{offset, trim_parse_error(e.what())};
  } catch (const nlohmann::json::out_of_range&) {
    // A number beyond a double's range (1e400). nlohmann gives no position: the number is the run
    // of number characters that ends where reading stopped (one past it, or at the end).
    auto in_number = [&](size_t i) {
      return text[i] != '\0' && std::strchr("0123456789+-.eE", text[i]) != nullptr;
    };
    size_t end = std::min(offset_now(), text.size());
    while (end > 0 && !in_number(end - 1)) --end;
    size_t begin = end;
    while (begin > 0 && in_number(begin - 1)) --begin;
    return JsonError{begin, "invalid JSON: the number " + quote(text.substr(begin, end - begin)) +
                                " is out of range (JSON numbers here must fit a double)"};
  } catch (const nlohmann::json::exception& e) {
    return JsonError{std::min(offset_now(), text.size()), std::string("invalid JSON: ") + e.what()};
  }
  return std::nullopt;
}

}  // namespace acrobat::io
