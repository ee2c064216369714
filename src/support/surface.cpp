#include "support/surface.h"

#include <atomic>
#include <string_view>

#include "support/diagnostics.h"

namespace acrobat {

namespace {

std::atomic<Surface> current{Surface::Cli};

// How Python shows a value of the argument: a number as it is, a string quoted, a NAME=VALUE of
// --set as the dict `dims` takes, a name of --disable as the list `disable` takes.
enum class Shape { Number, Text, Mapping, List };

// Every argument a shared message may name: the CLI's flag, Python's keyword, Python's shape.
struct Spelling {
  std::string_view flag, keyword;
  Shape shape;
};
constexpr Spelling kSpellings[] = {
    {"--set", "dims", Shape::Mapping},        {"--disable", "disable", Shape::List},
    {"--input", "spec", Shape::Text},         {"--vocab", "vocab", Shape::Text},
    {"--params", "params", Shape::Text},      {"--engine", "engine", Shape::Text},
    {"--entry", "entry", Shape::Text},        {"--loss", "loss", Shape::Text},
    {"--predict", "predict", Shape::Text},    {"--optimizer", "optimizer", Shape::Text},
    {"--lr", "lr", Shape::Number},            {"--momentum", "momentum", Shape::Number},
    {"--weight-decay", "weight_decay", Shape::Number}, {"--clip", "clip", Shape::Number},
    {"--eps", "eps", Shape::Number},          {"--betas", "betas", Shape::Number},
    {"--batch", "batch", Shape::Number},      {"--limit", "limit", Shape::Number},
    {"--threads", "threads", Shape::Number},  {"--seed", "seed", Shape::Number},
    {"--show", "show", Shape::Number},        {"--labels", "labels", Shape::Number},
    {"--first-index", "first_index", Shape::Number}, {"--cache-dir", "cache_dir", Shape::Text},
    {"--model", "path", Shape::Text},         {"--text", "text", Shape::Text},
    {"--name", "name", Shape::Text},          {"--on-error", "on_error", Shape::Text},
    {"--max-steps", "max_steps", Shape::Number}, {"--sparse-embeddings", "sparse_embeddings", Shape::Number},
};

const Spelling& spelling(const std::string& flag) {
  for (const Spelling& s : kSpellings)
    if (s.flag == flag) return s;
  ACROBAT_ASSERT(false, "no spelling for the argument " + flag + " (support/surface.cpp)");
  return kSpellings[0];  // not reached
}

}  // namespace

Surface surface() { return current.load(); }
void set_surface(Surface s) { current.store(s); }

std::string argument(const std::string& flag) {
  return surface() == Surface::Cli ? flag : std::string(spelling(flag).keyword);
}

std::string given(const std::string& flag, const std::string& value) {
  if (surface() == Surface::Cli) return flag + " '" + value + "'";
  const Spelling& s = spelling(flag);
  const std::string keyword(s.keyword);
  switch (s.shape) {
    case Shape::Number: return keyword + "=" + value;
    case Shape::Text: return keyword + "='" + value + "'";
    case Shape::List: return keyword + "=['" + value + "']";
    case Shape::Mapping: {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) return keyword + "={'" + value + "': ...}";
      return keyword + "={'" + value.substr(0, eq) + "': " + value.substr(eq + 1) + "}";
    }
  }
  return keyword;
}

void bad_integer(const std::string& flag, const std::string& value, int64_t min, uint64_t max) {
  throw UserError(given(flag, value) + ": expected an integer from " + std::to_string(min) + " to " +
                  std::to_string(max));
}

}  // namespace acrobat
