// The type checker's internals, shared by the files that implement it (check_module in check.h is
// its only public entry point): the dim evaluator and the Checker class, whose members are defined
// by concern in check.cpp (the passes in order), check_dims.cpp, check_decls.cpp, check_unify.cpp,
// check_exprs.cpp, check_ops.cpp, check_patterns.cpp and check_recursion.cpp.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lang/check.h"
#include "support/sizes.h"

namespace acrobat {

struct OpInfo;
struct OpAttrs;

namespace checker {

using namespace ast;

// Builtins that are not registry operators (ast::Builtin): `split` and `topk` are sugar for slices
// and ranked argmax reads (lowering expands them), `float` and `int` convert host numbers;
// `constant` is internal (float literals mixed with tensors become constants).
std::optional<Builtin> find_builtin(const std::string& name);

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

// Evaluates dims and other compile-time integer expressions.
class DimScope {
 public:
  void define(const std::string& name, int64_t value) { values_[name] = value; }
  // A dim whose declaration was reported as wrong: its uses report nothing more.
  void define_broken(const std::string& name) { broken_.insert(name); }
  bool broken(const std::string& name) const { return broken_.count(name) > 0; }
  const int64_t* find(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  std::optional<int64_t> eval(const DimExpr& d, DiagnosticSink& sink) const;

 private:
  std::unordered_map<std::string, int64_t> values_;
  std::set<std::string> broken_;
};

class Checker {
 public:
  Checker(Module& module, const DimOverrides& overrides, DiagnosticSink& sink)
      : m_(module), overrides_(overrides), sink_(sink), memory_(physical_memory_bytes()) {}

  void run();

 private:
  // ---------------------------------------------------------------------------------------------
  // Declarations (check_dims.cpp, check_decls.cpp)
  void claim_name(const std::string& name, const Span& span, const char* what);
  void declare_dims();
  void declare_types();
  void declare_params();
  void declare_funcs();
  // A size expression that names size variables of the function (`t + 1`, `n + m`, `2 * t`): the
  // sum it stands for (types.h), or nullopt (reported) when it is no sum of sizes; `none` when it
  // names no size variable (a dim expression).
  std::optional<SizeSum> size_expr(const DimExpr& d, bool& none);
  // `owner` names what the type belongs to in errors about its size, e.g. "param 'W':".
  Type resolve_type(const TypeExpr& t, const std::vector<std::string>& type_params,
                    const std::string& owner = "tensor type");

  // ---------------------------------------------------------------------------------------------
  // Unification (check_unify.cpp)
  Type fresh();
  Type error_type();
  bool is_error(const Type& t) const;
  bool mentions_error(const Type& t) const;
  Type shallow(Type t) const;
  Type zonk(const Type& t) const;
  bool occurs(int var, const Type& t) const;
  bool unify(const Type& a0, const Type& b0);
  bool expect(const Type& expected, const Type& found, const SourceLoc& loc,
              const std::string& context);
  Type instantiate(const Type& t, const std::vector<std::string>& params,
                   std::vector<Type>& args_out);
  // Size variables: a new one named `name`; a rigid one stands for itself (a function's own, in
  // its body), a flexible one (a callee's, instantiated at a call) is bound by unification.
  int64_t new_size(const std::string& name, bool rigid) const;
  // Follows the bindings of flexible size variables; a joined size whose terms are bound becomes
  // the joined size of their values (canonical: one sum, one size).
  int64_t resolve_dim(int64_t d) const;
  // The sum a size stands for: a constant, one variable, or a joined size's (resolved).
  SizeSum size_sum(int64_t d) const;
  // The size of a sum: a constant, a variable (once, plus 0), or the joined size that is that sum,
  // made the first time it is needed.
  int64_t joined_size(const SizeSum& s) const;
  // a + k * b, or nullopt on overflow.
  static std::optional<SizeSum> add_sums(const SizeSum& a, const SizeSum& b, int64_t k = 1);
  bool unify_dim(int64_t a, int64_t b);
  std::vector<int64_t> resolve_shape(std::vector<int64_t> shape) const;
  // A function's type with its size variables replaced by fresh flexible ones (`fresh_out`, in the
  // order of `sizes`).
  Type instantiate_sizes(const Type& t, const std::vector<int64_t>& params, std::vector<int64_t>& fresh_out,
                         const std::vector<int64_t>& made, std::vector<int64_t>& made_out, const SourceLoc& at);
  // Reports a gather's size (gather_type) that the type `t` of a lambda's body or of the code of a
  // match clause would carry out of it, also as a term of a joined size: its value is known only
  // inside (`what` names it). Only sizes made since size variable `first` count.
  void keep_gathers_inside(size_t first, const Type& t, const char* what);
  void zonk_expr(Expr& e);

  // ---------------------------------------------------------------------------------------------
  // Scopes
  struct Scope {
    std::vector<LocalVarPtr> vars;
    // Lambdas being checked, with the scope depth at which each began: a reference to a variable
    // bound below that depth is a capture.
    std::vector<std::pair<Lambda*, size_t>> lambdas;
  };

  // ---------------------------------------------------------------------------------------------
  // Functions and expressions (check_exprs.cpp)
  LocalVarPtr lookup_local(const std::string& name);
  void check_func(FuncDecl& f);
  void check_made_sizes(const FuncDecl& f);
  Type infer_at(Expr& e, bool tail);
  Type infer_returned(Expr& e);
  Type infer(Expr& e, const Type& expected = nullptr);
  Type infer_inner(Expr& e, const Type& expected);
  Type infer_name(Name& n);
  static std::vector<Type> param_types(const AdtDef* adt);
  std::string suggestion(const std::string& name);
  Type infer_call(Call& c);
  Type infer_index(Index& ix);
  Type gather_type(Index& ix, const ParamDecl& p);
  Type infer_proj(Proj& p);
  Type infer_unary(Unary& u);
  Type infer_let(Let& let);
  Type infer_if(If& i);
  Type infer_lambda(Lambda& l, const Type& expected);

  // ---------------------------------------------------------------------------------------------
  // Operator calls and binary operators (check_ops.cpp)
  std::optional<int64_t> const_int(const Expr& e);
  // A size variable of the function named by `e`, as the value of attribute `attr` of operator
  // `op` (its shape entry, types.h); 0 when reported as not allowed there; nullopt when `e` names
  // none.
  std::optional<int64_t> size_attr(const Expr& e, const std::string& attr, const char* op);
  // The sum of sizes (types.h SizeSum) `e` computes from the function's size variables, dims and
  // integers with + and -, and * by a constant (`n - 1`, `t + 1`); nullopt when it is no such sum.
  std::optional<SizeSum> position(const Expr& e);
  // The host int variables used as positions (`i` in slice(x, i, i + 1)) and the size variable
  // that stands for each; run_time_term names one `s` has, or is null.
  std::map<const LocalVar*, int64_t> local_sizes_;
  const std::string* run_time_term(const SizeSum& s) const;
  // slice(x, begin, end, axis) with a size among its bounds: the slice's length is end - begin.
  Type slice_at_sizes(Call& c, std::vector<int64_t> shape, const OpAttrs& attrs);
  bool bind_attrs(Call& c, const OpInfo& op, size_t tensor_args, OpAttrs& attrs);
  bool tensor_operands(Call& c, const char* op_name, size_t n,
                       std::vector<std::vector<int64_t>>& shapes);
  size_t count_tensor_operands(const Call& c, const OpInfo& op);
  Type infer_op(Call& c, const OpInfo& op);
  // concat along an axis whose size is a size variable in some operand: the joined size is a new
  // size the call makes (lowering computes its value, the sum of the operands' sizes).
  Type concat_growing(Call& c, std::vector<std::vector<int64_t>> shapes, const OpAttrs& attrs);
  Type infer_split(Call& c);
  Type infer_builtin(Call& c, Builtin b);  // topk, float, int; split above
  Type infer_binary(Binary& b);
  // The type of `b` given its operands' types (already inferred, shallow).
  Type binary_type(Binary& b, const Type& l, const Type& r);

  // ---------------------------------------------------------------------------------------------
  // Matches and patterns (check_patterns.cpp)
  Type infer_match(Match& m);
  void check_exhaustive(const Match& m, const Type& scrut);
  void bind_pattern(Pattern& p, const Type& t, bool refutable_ok);

  // ---------------------------------------------------------------------------------------------
  // Recursion without a base case (check_recursion.cpp)
  void check_recursion();

  // ---------------------------------------------------------------------------------------------
  // What a model may allocate (check_bounds.cpp)
  // True when a tensor of `shape` fits the kernels' index type and this machine's memory; otherwise
  // reports "<what> f32[...] has/needs ..." at `at`.
  bool admit_tensor(const std::vector<int64_t>& shape, const SourceLoc& at, const std::string& what);
  // Reports the largest param when all params together need more than this machine's memory.
  void check_param_memory();

  Module& m_;
  const DimOverrides& overrides_;
  DiagnosticSink& sink_;
  DimScope dims_;
  std::unordered_map<std::string, SourceLoc> top_names_;
  // Names defined twice (reported): which definition a use means is unknown, so uses report nothing.
  std::set<std::string> redefined_;
  std::unordered_map<std::string, const AdtDef*> adts_;
  std::unordered_map<std::string, const CtorDef*> ctors_;
  std::unordered_map<std::string, const ParamDecl*> params_;
  std::set<std::string> broken_params_;  // params whose declaration was reported as wrong
  std::unordered_map<std::string, const FuncDecl*> funcs_;
  std::vector<Type> subst_;
  std::set<int> error_vars_;
  // Size variables by index: name, rigid or flexible, and a flexible one's binding (0: none).
  struct SizeVar {
    bool rigid = true;
    int64_t bound = 0;
  };
  mutable std::vector<SizeVar> sizes_;
  mutable std::vector<std::string> size_names_;  // by index, for shape_str (types.h)
  // The sizes gathers and calls of functions that make sizes made, where, and which of the two.
  struct MadeSize {
    SourceLoc at;
    const char* what;
  };
  std::map<int64_t, MadeSize> gather_sizes_;
  std::map<std::string, int> made_names_;  // in the function being checked: calls' made sizes by name
  // The sizes concat joins and size expressions name (types.h SizeSum), each sum once. Interning
  // a sum (resolve_dim does, when a term's binding changed it) adds a name, not knowledge: the
  // tables are mutable so that the const walks over types can canonicalise.
  mutable SizeSums sum_of_;
  mutable std::map<SizeSum, int64_t> sums_;
  // While resolve_type runs on a function's signature or body: the size variables it may name,
  // and whether an unknown lower-case name in a shape declares a new one (parameter types).
  std::vector<std::pair<std::string, int64_t>>* size_scope_ = nullptr;
  bool sizes_declarable_ = false;
  bool made_declarable_ = false;  // ... or a size the function makes (its result's type)
  // Whether the expression being inferred is one the function returns (a tail position through
  // let, if and match) in a function that makes sizes (check_func).
  bool tail_ = false;
  Scope scope_;
  FuncDecl* current_func_ = nullptr;
  const Expr* direct_callee_ = nullptr;  // the callee of the call being checked, while inferring it
  int64_t memory_;  // this machine's physical memory in bytes: the bound on what a model allocates
};

}  // namespace checker
}  // namespace acrobat
