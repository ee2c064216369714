#include "engines/inputs.h"

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "io/files.h"
#include "io/json_lines.h"
#include "io/ptb.h"
#include "io/tokens.h"
#include "support/surface.h"
#include "io/vocab.h"
#include "support/sizes.h"

namespace acrobat {

namespace {

struct KindName {
  InputKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {InputKind::Sst, "sst"},
    {InputKind::SstTokens, "sst-tokens"},
    {InputKind::Tokens, "tokens"},
    {InputKind::Json, "json"},
    {InputKind::Lengths, "lengths"},
};

std::string known_kinds() {
  std::string s;
  for (auto& k : kKinds) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

bool is_prelude_adt(const Type& t, const char* name) {
  return t->kind == TypeKind::Adt && t->adt->name == name && t->adt->span.begin.file == "<prelude>";
}

bool is_int_list(const Type& t) {
  return is_prelude_adt(t, "List") && t->args.size() == 1 && t->args[0]->kind == TypeKind::Int;
}

const CtorDef* ctor_named(const AdtDef* adt, const std::string& name) {
  for (auto& c : adt->ctors)
    if (c->name == name) return c.get();
  return nullptr;
}

Value make_list(const AdtDef* list, const std::vector<Value>& items) {
  const CtorDef* nil = ctor_named(list, "Nil");
  const CtorDef* cons = ctor_named(list, "Cons");
  Value out = Value::adt(nil, {});
  for (size_t i = items.size(); i-- > 0;) out = Value::adt(cons, {items[i], out});
  return out;
}

Value int_list(const AdtDef* list, const std::vector<int64_t>& ids) {
  std::vector<Value> items;
  items.reserve(ids.size());
  for (int64_t id : ids) items.push_back(Value::of_int(id));
  return make_list(list, items);
}

// A label in [0, classes) as a one-hot f32[1, classes]; by default SST's sentiment (0-4, checked by
// the reader).
Value one_hot_label(int64_t label, int64_t classes = 5) {
  Tensor t = Tensor::allocate({1, classes});
  std::fill_n(t.data.get(), classes, 0.0f);
  t.data[label] = 1.0f;
  return Value::of_tensor(std::move(t));
}

// The reader bounds a tree's depth (io::kMaxPtbDepth), which keeps this recursion within the stack.
// A Tree, or with `labelled` a LabelledTree (each node's label one-hot, first).
Value tree_value(const io::PtbTree& t, const AdtDef* tree, const io::Vocabulary& vocab, size_t depth, bool labelled) {
  if (depth > io::kMaxPtbDepth)
    throw UserError(t.loc, "tree deeper than " + std::to_string(io::kMaxPtbDepth) + " levels");
  std::vector<Value> fields;
  if (labelled) fields.push_back(one_hot_label(t.label));
  if (t.children.empty()) {
    fields.push_back(Value::of_int(vocab.id(t.word)));
    return Value::adt(ctor_named(tree, labelled ? "LabelledLeaf" : "Leaf"), std::move(fields));
  }
  if (t.children.size() != 2)
    throw UserError(t.loc, "expected a binary tree (a leaf or a node with 2 children), found a node "
                           "with " + std::to_string(t.children.size()) + " children");
  fields.push_back(tree_value(t.children[0], tree, vocab, depth + 1, labelled));
  fields.push_back(tree_value(t.children[1], tree, vocab, depth + 1, labelled));
  return Value::adt(ctor_named(tree, labelled ? "LabelledNode" : "Node"), std::move(fields));
}

[[noreturn]] void type_mismatch(const InputSpec& spec, const Type& type, const char* needs) {
  throw UserError(given("--input", std::string(input_kind_name(spec.kind)) + ":" + spec.path) +
                  " produces " + needs + ", but the entry function takes " + type_str(type) +
                  (spec.kind == InputKind::Json ? "" : "; use json:FILE for other input types"));
}

io::Vocabulary load_vocab(const std::string& vocab_path, const InputSpec& spec) {
  if (vocab_path.empty())
    throw UserError(given("--input", std::string(input_kind_name(spec.kind)) + ":" + spec.path) +
                    " maps words to ids and needs a vocabulary: give " + argument("--vocab"));
  return io::Vocabulary::load(vocab_path);
}

}  // namespace

std::string vocab_path(const InputSpec& spec, const std::string& given) {
  if (!given.empty()) return given;
  if (spec.kind != InputKind::Sst && spec.kind != InputKind::SstTokens) return "";
  const size_t slash = spec.path.find_last_of('/');
  const std::string candidate = (slash == std::string::npos ? "" : spec.path.substr(0, slash + 1)) + "vocab.txt";
  return std::ifstream(candidate).good() ? candidate : "";
}

const char* input_kind_name(InputKind kind) {
  for (auto& k : kKinds)
    if (k.kind == kind) return k.name;
  return "?";
}

InputSpec parse_input_spec(const std::string& spec) {
  size_t colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    throw UserError(given("--input", spec) + ": expected KIND:FILE with KIND one of " + known_kinds());
  std::string kind = spec.substr(0, colon);
  for (auto& k : kKinds)
    if (kind == k.name) return InputSpec{k.kind, spec.substr(colon + 1)};
  throw UserError(given("--input", spec) + ": unknown input kind '" + kind + "' (expected one of " +
                  known_kinds() + ")");
}

bool has_root_labels(const InputSpec& spec) {
  return spec.kind == InputKind::Sst || spec.kind == InputKind::SstTokens;
}

std::vector<int> sst_root_labels(const InputSpec& spec, size_t count) {
  ACROBAT_ASSERT(has_root_labels(spec), "root labels of sst trees");
  std::vector<int> labels;
  for (const io::PtbTree& tree : io::read_ptb_file(spec.path)) {
    if (labels.size() == count) break;
    labels.push_back(tree.label);
  }
  return labels;
}

std::vector<Value> load_inputs(const InputSpec& spec, const Type& type,
                               const std::string& vocab_path, size_t limit) {
  std::vector<Value> out;
  auto full = [&] { return limit != 0 && out.size() >= limit; };
  switch (spec.kind) {
    case InputKind::Sst:
    case InputKind::SstTokens: {
      bool tree = spec.kind == InputKind::Sst;
      const bool labelled = is_prelude_adt(type, tree ? "LabelledTree" : "LabelledWords");
      if (tree ? !is_prelude_adt(type, "Tree") && !labelled : !is_int_list(type) && !labelled)
        type_mismatch(spec, type, tree ? "Tree (or LabelledTree) values" : "List[int] (or LabelledWords) values");
      // The trees first: a missing data file is reported as such, not as a missing vocabulary.
      std::vector<io::PtbTree> trees = io::read_ptb_file(spec.path);
      io::Vocabulary vocab = load_vocab(vocab_path, spec);
      for (const auto& t : trees) {
        if (full()) break;
        if (tree) {
          out.push_back(tree_value(t, type->adt, vocab, 0, labelled));
        } else {
          std::vector<int64_t> ids;
          for (const auto& w : io::ptb_leaves(t)) ids.push_back(vocab.id(w));
          if (labelled) {
            const CtorDef* words = ctor_named(type->adt, "LabelledWords");
            out.push_back(Value::adt(words, {one_hot_label(t.label), int_list(words->fields[1]->adt, ids)}));
          } else {
            out.push_back(int_list(type->adt, ids));
          }
        }
      }
      break;
    }
    case InputKind::Tokens: {
      if (!is_int_list(type)) type_mismatch(spec, type, "List[int] values");
      for (const auto& ids : io::read_token_lines(spec.path)) {
        if (full()) break;
        out.push_back(int_list(type->adt, ids));
      }
      break;
    }
    case InputKind::Lengths: {
      if (!is_rows_type(type))
        type_mismatch(spec, type, "tensors f32[n, ...] with n from the file and the rest fixed, or pairs "
                                  "(f32[1, C], f32[n, ...]) of a label and such rows");
      const Type& rows = type->kind == TypeKind::Tuple ? type->args[1] : type;
      const std::vector<int64_t> rest(rows->shape.begin() + 1, rows->shape.end());
      const int64_t row = num_elements(rest);
      const auto lines = io::read_token_lines(spec.path);
      for (size_t i = 0; i < lines.size() && !full(); ++i) {
        const SourceLoc at{spec.path, static_cast<uint32_t>(i + 1), 1};
        if (lines[i].size() != 1 || lines[i][0] < 1)
          throw UserError(at, "expected one length (an integer >= 1) on the line, found " +
                                  std::to_string(lines[i].size()) + " number(s)" +
                                  (lines[i].size() == 1 ? " (0)" : ""));
        const int64_t n = lines[i][0];
        if (n > kMaxTensorElements / row)
          throw UserError(at, "length " + std::to_string(n) + " gives a tensor of more than " +
                                  std::to_string(kMaxTensorElements) + " elements");
        out.push_back(random_rows(type, n, i));
      }
      break;
    }
    case InputKind::Json:
      for (const auto& line : io::read_json_lines(spec.path)) {
        if (full()) break;
        out.push_back(value_from_json(line.value, type, line.loc));
      }
      break;
  }
  if (out.empty())
    throw UserError(SourceLoc{spec.path, 0, 0},
                    std::string("the input file holds no instances (expected ") +
                        (spec.kind == InputKind::Json      ? "one JSON value per line"
                         : spec.kind == InputKind::Tokens  ? "one line of token ids per instance"
                         : spec.kind == InputKind::Lengths ? "one length per line"
                                                          : "one Penn-Treebank tree per line") +
                        ")");
  return out;
}

namespace {
bool is_plain_rows_type(const Type& type) {
  bool fits = type->kind == TypeKind::Tensor && !type->shape.empty() && is_size_var(type->shape[0]);
  for (size_t d = 1; fits && d < type->shape.size(); ++d) fits = !is_size_var(type->shape[d]);
  return fits;
}

// f32[1, C], C fixed: a one-hot label.
bool is_label_type(const Type& type) {
  return type->kind == TypeKind::Tensor && type->shape.size() == 2 && type->shape[0] == 1 && !is_size_var(type->shape[1]) &&
         type->shape[1] >= 1;
}
}  // namespace

bool is_rows_type(const Type& type) {
  if (type->kind == TypeKind::Tuple)
    return type->args.size() == 2 && is_label_type(type->args[0]) && is_plain_rows_type(type->args[1]);
  return is_plain_rows_type(type);
}

Value random_rows(const Type& type, int64_t n, uint64_t seed) {
  const bool labelled = type->kind == TypeKind::Tuple;
  std::vector<int64_t> shape = labelled ? type->args[1]->shape : type->shape;
  shape[0] = n;
  Tensor t = Tensor::allocate(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t k = 0; k < t.size(); ++k) t.data[k] = uniform(rng);
  if (!labelled) return Value::of_tensor(std::move(t));
  const int64_t classes = type->args[0]->shape[1];
  const auto label = static_cast<int64_t>(rng() % static_cast<uint64_t>(classes));
  return Value::tuple({one_hot_label(label, classes), Value::of_tensor(std::move(t))});
}

// ---- JSON ----

namespace {
// JSON has no NaN or infinities (nlohmann would write null): they are written as the strings "NaN",
// "Infinity" and "-Infinity", as JavaScript and Python's json module spell them.
nlohmann::json float_json(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

// A number, or one of those strings; nullopt for anything else.
std::optional<double> json_float(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "NaN") return std::nan("");
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
  }
  return std::nullopt;
}
}  // namespace

nlohmann::json value_to_json(const Value& v, const Type& type) {
  using nlohmann::json;
  switch (v.kind) {
    case Value::Kind::Unit: return json::array();
    case Value::Kind::Int: return v.i;
    case Value::Kind::Float: return float_json(v.f);
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Tensor: {
      json data = json::array();
      const float* p = v.tensor->data.get();
      for (int64_t i = 0; i < v.tensor->size(); ++i) data.push_back(float_json(p[i]));
      return json{{"shape", v.tensor->shape}, {"data", std::move(data)}};
    }
    case Value::Kind::Tuple: {
      json out = json::array();
      for (size_t i = 0; i < v.agg->fields.size(); ++i)
        out.push_back(value_to_json(v.agg->fields[i], type->args[i]));
      return out;
    }
    case Value::Kind::Adt: {
      const AdtDef* adt = v.agg->ctor->adt;
      if (adt->is_list()) {
        json out = json::array();
        const Value* cur = &v;
        while (cur->agg->ctor->name == "Cons") {
          out.push_back(value_to_json(cur->agg->fields[0], type->args[0]));
          cur = &cur->agg->fields[1];
        }
        return out;
      }
      const CtorDef* ctor = v.agg->ctor;
      if (ctor->fields.empty()) return ctor->name;
      json fields = json::array();
      for (size_t i = 0; i < ctor->fields.size(); ++i)
        fields.push_back(value_to_json(v.agg->fields[i],
                                       substitute_params(ctor->fields[i], adt->type_params, type->args)));
      return json{{ctor->name, std::move(fields)}};
    }
    case Value::Kind::Closure:
      throw UserError("the model returned a function value, which has no JSON form");
    case Value::Kind::Lazy: ACROBAT_ASSERT(false, "an engine returned an uncomputed tensor");
  }
  return nullptr;
}

namespace {

// Where the reader is in a value, as a chain of segments on the reader's stack: rendered ("$[1].Node[0]")
// only for a message, so that reading a deeply nested value costs no string per level.
struct JsonPath {
  const JsonPath* parent = nullptr;
  size_t index = 0;             // "[index]", when `field` is empty
  std::string_view field = {};  // ".field"
  std::string str() const {
    std::vector<const JsonPath*> chain;
    for (const JsonPath* p = this; p->parent; p = p->parent) chain.push_back(p);
    std::string out = "$";
    for (size_t i = chain.size(); i-- > 0;)
      out += chain[i]->field.empty() ? "[" + std::to_string(chain[i]->index) + "]" : "." + std::string(chain[i]->field);
    return out;
  }
};

class JsonReader {
  static constexpr const char* kNumber = "a number (or \"NaN\", \"Infinity\", \"-Infinity\")";

 public:
  explicit JsonReader(const SourceLoc& where) : where_(where) {}

  Value read(const nlohmann::json& j, const Type& t, const JsonPath& path) {
    using nlohmann::json;
    // The reader recurses per level of the value: as deep as the files' readers allow and no deeper,
    // whoever parsed the JSON (a server's request, a Python object).
    struct Level {
      size_t& depth;
      explicit Level(size_t& d) : depth(++d) {}
      ~Level() { --depth; }
    } level(depth_);
    if (depth_ > io::kMaxJsonDepth)
      throw UserError(where_, "at " + path.str() + ": an instance nested more than " +
                                  std::to_string(io::kMaxJsonDepth) + " levels deep");
    switch (t->kind) {
      case TypeKind::Int:
        if (!j.is_number_integer()) fail(path, "an integer", j);
        if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
          fail(path, "an integer that fits in 64 bits", j);
        return Value::of_int(j.get<int64_t>());
      case TypeKind::Float: {
        std::optional<double> x = json_float(j);
        if (!x) fail(path, kNumber, j);
        return Value::of_float(*x);
      }
      case TypeKind::Bool:
        if (!j.is_boolean()) fail(path, "true or false", j);
        return Value::of_bool(j.get<bool>());
      case TypeKind::Tensor: return tensor(j, t->shape, path);
      case TypeKind::Tuple: {
        if (!j.is_array() || j.size() != t->args.size())
          fail(path, "an array of " + std::to_string(t->args.size()) + " elements for " + type_str(t), j);
        std::vector<Value> fields;
        for (size_t i = 0; i < t->args.size(); ++i)
          fields.push_back(read(j[i], t->args[i], JsonPath{&path, i}));
        return Value::tuple(std::move(fields));
      }
      case TypeKind::Adt: return adt(j, t, path);
      default:
        throw UserError(where_, "values of type " + type_str(t) + " cannot be read from JSON");
    }
  }

 private:
  // "at $[1]: expected an integer, found string "7"" (a null is just "null", not "null null").
  [[noreturn]] void fail(const JsonPath& path, const std::string& expected,
                         const nlohmann::json& found) {
    std::string what = io::json_type_name(found);
    if (found.is_primitive() && !found.is_null()) {
      std::string text = found.dump();
      what += " " + (text.size() > 40 ? text.substr(0, 40) + "..." : text);
    }
    throw UserError(where_, "at " + path.str() + ": expected " + expected + ", found " + what);
  }

  // A tensor of type f32`shape`; a size variable in it takes the JSON's size there, the same at
  // every place it appears in the instance.
  Value tensor(const nlohmann::json& j, const std::vector<int64_t>& type_shape, const JsonPath& path) {
    std::vector<int64_t> shape = type_shape;
    if (j.is_object()) {
      if (!j.contains("shape") || !j.contains("data") || j.size() != 2)
        fail(path, "a tensor as {\"shape\": [...], \"data\": [...]} or nested arrays", j);
      const auto& given = j["shape"];
      bool fits = given.is_array() && given.size() == shape.size();
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = given[d].is_number_integer() && bind(shape[d], given[d].get<int64_t>());
      if (!fits) fail(JsonPath{&path, 0, "shape"}, "the shape " + shape_str(type_shape) + bound_sizes(), given);
    } else {
      // Nested arrays: each dimension's size is the length of the first array at its depth.
      const nlohmann::json* at = &j;
      for (size_t d = 0; d < shape.size() && at->is_array() && !at->empty(); ++d) {
        if (is_size_var(shape[d]) && !bind(shape[d], static_cast<int64_t>(at->size())))
          fail(path, "an array of " + std::to_string(sizes_.at(shape[d])) + " elements (dimension " +
                         std::to_string(d) + " of a tensor " + shape_str(type_shape) + bound_sizes() + ")",
               *at);
        at = &(*at)[0];
      }
      if (is_ragged(shape)) fail(path, "a tensor " + shape_str(type_shape) + " as nested arrays", j);
    }
    checked_tensor_size(shape, path);
    Tensor t = Tensor::allocate(shape);
    if (j.is_object()) {
      const auto& data = j["data"];
      if (!data.is_array() || static_cast<int64_t>(data.size()) != t.size())
        fail(JsonPath{&path, 0, "data"}, "an array of " + std::to_string(t.size()) + " numbers", data);
      const JsonPath data_path{&path, 0, "data"};
      for (int64_t i = 0; i < t.size(); ++i) {
        std::optional<double> x = json_float(data[i]);
        if (!x) fail(JsonPath{&data_path, static_cast<size_t>(i)}, kNumber, data[i]);
        t.data[i] = static_cast<float>(*x);
      }
    } else {
      int64_t filled = 0;
      nested(j, shape, 0, t.data.get(), filled, path);
    }
    return Value::of_tensor(std::move(t));
  }

  void nested(const nlohmann::json& j, const std::vector<int64_t>& shape, size_t dim, float* out,
              int64_t& filled, const JsonPath& path) {
    if (dim == shape.size()) {
      std::optional<double> x = json_float(j);
      if (!x) fail(path, kNumber, j);
      out[filled++] = static_cast<float>(*x);
      return;
    }
    if (!j.is_array() || static_cast<int64_t>(j.size()) != shape[dim])
      fail(path, "an array of " + std::to_string(shape[dim]) + " elements (dimension " +
                     std::to_string(dim) + " of a tensor " + shape_str(shape) + ")",
           j);
    for (size_t i = 0; i < j.size(); ++i)
      nested(j[i], shape, dim + 1, out, filled, JsonPath{&path, i});
  }

  // A dimension `dim` of the type takes size `n`: a constant must be n, a size variable is bound
  // to it (n >= 1) or must already be n.
  bool bind(int64_t& dim, int64_t n) {
    if (!is_size_var(dim)) return dim == n;
    auto [it, fresh] = sizes_.emplace(dim, n);
    if (n < 1 || it->second != n) return false;
    dim = n;
    return true;
  }

  // " (with n = 5)" for the size variables bound so far, for messages.
  std::string bound_sizes() const {
    std::string s;
    for (auto [dim, n] : sizes_) s += (s.empty() ? " (with " : ", ") + dim_str(dim) + " = " + std::to_string(n);
    return s.empty() ? s : s + "; a size variable is at least 1)";
  }

  // An instance's tensor must fit the kernels' index type (as the checker makes every fixed one).
  void checked_tensor_size(const std::vector<int64_t>& shape, const JsonPath& path) {
    std::optional<int64_t> n = checked_product<int64_t>(shape);
    if (!n || *n > kMaxTensorElements)
      throw UserError(where_, "at " + path.str() + ": a tensor " + shape_str(shape) + " has more than " +
                                  std::to_string(kMaxTensorElements) + " elements");
  }

  Value adt(const nlohmann::json& j, const Type& t, const JsonPath& path) {
    const AdtDef* adt = t->adt;
    if (adt->is_list()) {
      if (!j.is_array()) fail(path, "an array for " + type_str(t), j);
      std::vector<Value> items;
      for (size_t i = 0; i < j.size(); ++i)
        items.push_back(read(j[i], t->args[0], JsonPath{&path, i}));
      return make_list(adt, items);
    }
    std::string ctors;
    for (auto& c : adt->ctors) ctors += (ctors.empty() ? "" : ", ") + c->name;
    std::string name;
    const nlohmann::json* fields = nullptr;
    if (j.is_string()) {
      name = j.get<std::string>();
    } else if (j.is_object() && j.size() == 1) {
      name = j.begin().key();
      fields = &j.begin().value();
    } else {
      fail(path, "a constructor of " + adt->name + " (" + ctors + ") as {\"Ctor\": [fields]} or \"Ctor\"", j);
    }
    const CtorDef* ctor = ctor_named(adt, name);
    if (!ctor)
      throw UserError(where_, "at " + path.str() + ": '" + name + "' is not a constructor of " + adt->name +
                                  " (expected one of " + ctors + ")");
    const JsonPath sub{&path, 0, ctor->name};
    size_t given = fields ? (fields->is_array() ? fields->size() : 1) : 0;
    if (fields && !fields->is_array()) fail(sub, "an array of the constructor's fields", *fields);
    if (given != ctor->fields.size())
      throw UserError(where_, "at " + sub.str() + ": constructor " + name + " has " +
                                  std::to_string(ctor->fields.size()) + " field(s), found " +
                                  std::to_string(given));
    std::vector<Value> values;
    for (size_t i = 0; i < ctor->fields.size(); ++i)
      values.push_back(read((*fields)[i], substitute_params(ctor->fields[i], adt->type_params, t->args),
                            JsonPath{&sub, i}));
    return Value::adt(ctor, std::move(values));
  }

  SourceLoc where_;
  std::map<int64_t, int64_t> sizes_;  // size variables bound by this value's tensors
  size_t depth_ = 0;                  // of the value being read
};

}  // namespace

Value value_from_json(const nlohmann::json& json, const Type& type, const SourceLoc& where) {
  return JsonReader(where).read(json, type, JsonPath{});
}

PredictRequest parse_predict_request(std::string_view body, const Type& type) {
  nlohmann::json json;
  if (auto e = io::parse_json_strict(body, json, [](size_t at) { return "byte " + std::to_string(at); }))
    throw UserError("the request body is not JSON: " + e->message + " at byte " + std::to_string(e->offset));
  if (!json.is_object() || !json.contains("instances") || !json["instances"].is_array())
    throw UserError("the request body must be a JSON object {\"instances\": [...]}");
  PredictRequest out;
  auto integer = [&](const char* key, int64_t min, int64_t max) -> std::optional<int64_t> {
    if (!json.contains(key)) return std::nullopt;
    const auto& v = json[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max)
      throw UserError(std::string("\"") + key + "\" must be an integer from " + std::to_string(min) + " to " +
                      std::to_string(max) + ", found " + v.dump().substr(0, 40));
    return v.get<int64_t>();
  };
  out.priority = static_cast<int>(integer("priority", 0, kMaxPriority).value_or(0));
  out.deadline_ms = integer("deadline_ms", 1, kMaxDeadlineMs).value_or(0);
  if (json.contains("stream")) {
    if (!json["stream"].is_boolean())
      throw UserError("\"stream\" must be true or false, found " + json["stream"].dump().substr(0, 40));
    out.stream = json["stream"].get<bool>();
  }
  const auto& instances = json["instances"];
  if (instances.empty()) throw UserError("\"instances\" is empty");
  out.instances.reserve(instances.size());
  for (size_t i = 0; i < instances.size(); ++i)
    out.instances.push_back(value_from_json(instances[i], type, SourceLoc{"instances[" + std::to_string(i) + "]", 0, 0}));
  return out;
}

}  // namespace acrobat
