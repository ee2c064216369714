#include "lang/frontend.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "lang/parser.h"
#include "support/surface.h"

namespace acrobat {

std::shared_ptr<ast::Module> parse_model_text(const std::string& file, const std::string& text,
                                              const DimOverrides& overrides) {
  auto module = std::make_shared<ast::Module>();
  DiagnosticSink sink;
  parse_into(*module, "<prelude>", prelude_source(), sink);
  ACROBAT_ASSERT(!sink.has_errors(), "the prelude does not parse");
  parse_into(*module, file, text, sink);
  sink.throw_if_errors();
  check_module(*module, overrides, sink);
  return module;
}

namespace {
// True when a value of type `t` may hold a function (directly, or in a tuple or data type field).
bool holds_function(const Type& t, std::set<const AdtDef*>& seen) {
  switch (t->kind) {
    case TypeKind::Func: return true;
    case TypeKind::Tuple:
      return std::any_of(t->args.begin(), t->args.end(),
                         [&](const Type& a) { return holds_function(a, seen); });
    case TypeKind::Adt:
      if (std::any_of(t->args.begin(), t->args.end(),
                      [&](const Type& a) { return holds_function(a, seen); }))
        return true;
      if (!seen.insert(t->adt).second) return false;
      for (const auto& c : t->adt->ctors)
        for (const auto& f : c->fields)
          if (holds_function(f, seen)) return true;
      return false;
    default: return false;
  }
}
}  // namespace

void check_entry(const ast::Module& module, const std::string& entry) {
  const std::string& file = module.files.back();  // the prelude comes first
  const ast::FuncDecl* f = module.find_func(entry);
  if (!f) {
    std::string names;
    for (const auto& g : module.funcs)
      if (g->span.begin.file == file) names += (names.empty() ? "" : ", ") + g->name;
    throw UserError(SourceLoc{file, 0, 0},
                    "the model has no function '" + entry + "' to run (" +
                        (names.empty() ? std::string("it defines no function")
                                       : "its functions: " + names + "; " + argument("--entry") + " chooses one") +
                        ")");
  }
  if (f->params.size() != 1)
    throw UserError(f->span.begin, "entry function '" + entry +
                                       "' must take exactly one parameter (the input instance), "
                                       "found " + std::to_string(f->params.size()));
  // The instance gives the entry's sizes: each must be a size of a tensor, directly or in tuples.
  std::set<int64_t> given;
  std::function<void(const Type&)> sizes_given = [&](const Type& t) {
    if (t->kind == TypeKind::Tensor)
      for (int64_t d : t->shape) given.insert(d);
    if (t->kind == TypeKind::Tuple)
      for (const auto& e : t->args) sizes_given(e);
  };
  sizes_given(f->type->args[0]);
  for (int64_t d : f->size_params)
    if (!given.count(d)) {
      SizeNamesScope names(module.size_names);
      throw UserError(f->params[0].span.begin,
                      "entry function '" + entry + "': its size '" + dim_str(d) +
                          "' must be a dimension of a tensor of its parameter (directly or in "
                          "a tuple), where each instance gives it; found " +
                          type_str(f->type->args[0]));
    }
  std::set<const AdtDef*> seen;
  if (holds_function(f->type->ret, seen))
    throw UserError(f->span.begin, "entry function '" + entry + "' returns " +
                                       type_str(f->type->ret) +
                                       ", which may hold a function value: outputs are written as "
                                       "JSON, which has no form for functions");
}

std::shared_ptr<ast::Module> parse_model_file(const std::string& path,
                                              const DimOverrides& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open model file " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_text(path, text.str(), overrides);
}

}  // namespace acrobat
