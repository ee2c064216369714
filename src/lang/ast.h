// The syntax tree of a model file, as parsed. Every node carries its span. The checker fills in the
// `type` of every expression and what every name refers to; lowering reads those annotations.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "types/types.h"

namespace acrobat::ast {

// ---- Type syntax (resolved into acrobat::Type by the checker) ----------------------------------
struct DimExpr;
using DimExprPtr = std::unique_ptr<DimExpr>;
struct DimExpr {  // a compile-time integer: literal, dim name, or + - * / of those
  enum Kind { Lit, Name, Binary } kind;
  int64_t value = 0;
  std::string name;
  char op = 0;
  DimExprPtr lhs, rhs;
  Span span;
  ~DimExpr();  // a long chain of operators is destroyed by a loop
};

struct TypeExpr;
using TypeExprPtr = std::unique_ptr<TypeExpr>;
struct TypeExpr {
  enum Kind { Int, Float, Bool, Tensor, Tuple, Named, Func } kind;
  std::vector<DimExprPtr> dims;    // Tensor
  std::vector<TypeExprPtr> args;   // Tuple elements, Named type arguments, Func parameters
  TypeExprPtr ret;                 // Func
  std::string name;                // Named
  Span span;
};

// ---- Expressions --------------------------------------------------------------------------------
enum class ExprKind {
  IntLit, FloatLit, BoolLit, Name, Call, Index, Proj, Tuple, Unary, Binary, Let, If, Match, Lambda
};

// A variable bound by let, a function parameter, a lambda parameter or a pattern.
struct LocalVar {
  std::string name;
  Type type;
  Span span;
};
using LocalVarPtr = std::shared_ptr<LocalVar>;

struct FuncDecl;
struct ParamDecl;
struct DimDecl;

struct Expr {
  ExprKind kind;
  Span span;
  Type type;  // set by the checker
  explicit Expr(ExprKind k) : kind(k) {}
  virtual ~Expr() = default;
  template <class T> T& as() { return static_cast<T&>(*this); }
  template <class T> const T& as() const { return static_cast<const T&>(*this); }
};
using ExprPtr = std::unique_ptr<Expr>;

struct IntLit : Expr { int64_t value = 0; IntLit() : Expr(ExprKind::IntLit) {} };
struct FloatLit : Expr { double value = 0; FloatLit() : Expr(ExprKind::FloatLit) {} };
struct BoolLit : Expr { bool value = false; BoolLit() : Expr(ExprKind::BoolLit) {} };

// What a name refers to, as resolved by the checker.
enum class NameRef { Unresolved, Local, Dim, Param, Function, Ctor, Op, Builtin };

// The built-in functions that are not registry operators (the checker types them, lowering expands
// them): split(x, n) into slices, topk(x, k) into k ranked argmax reads, float(i) and int(f) host
// conversions, emit(v) handing a host value out while the instance runs.
enum class Builtin { Split, TopK, ToFloat, ToInt, Emit };

struct Name : Expr {
  std::string name;
  NameRef ref = NameRef::Unresolved;
  LocalVarPtr local;                  // Local
  int64_t dim_value = 0;              // Dim
  const ParamDecl* param = nullptr;   // Param
  const FuncDecl* func = nullptr;     // Function
  const CtorDef* ctor = nullptr;      // Ctor
  int op = -1;                        // Op (an OpId)
  Builtin builtin = Builtin::Split;   // Builtin
  std::vector<Type> type_args;        // instantiation of a generic function or constructor
  // A call of a function with size variables: what each of its size_params is at the call (a
  // constant or the caller's size variable), solved by the checker.
  std::vector<int64_t> sizes;
  // A call of a function that makes sizes (FuncDecl::made_sizes): the caller's fresh size for
  // each, bound to the value the callee returns beside its result.
  std::vector<int64_t> made;
  Name() : Expr(ExprKind::Name) {}
};

struct NamedArg {
  std::string name;
  ExprPtr value;
  Span span;
};

struct Call : Expr {
  ExprPtr callee;
  std::vector<ExprPtr> args;
  std::vector<NamedArg> named;       // `axis=0` style static attributes of operators
  std::vector<int64_t> attrs;        // set by the checker for operator calls
  uint64_t attr_sizes = 0;           // which of them are size variables (OpAttrs::sizes)
  double value_attr = 0;             // set by the checker for constants
  Call() : Expr(ExprKind::Call) {}
};

struct Index : Expr {  // param[host int]
  ExprPtr base, index;
  Index() : Expr(ExprKind::Index) {}
};

struct Proj : Expr {  // tuple.N
  ExprPtr base;
  int index = 0;
  Proj() : Expr(ExprKind::Proj) {}
};

struct Tuple : Expr {
  std::vector<ExprPtr> elems;
  Tuple() : Expr(ExprKind::Tuple) {}
};

struct Unary : Expr {
  char op;  // '-' or '!'
  ExprPtr operand;
  Unary() : Expr(ExprKind::Unary) {}
};

enum class BinOp { Add, Sub, Mul, Div, Mod, MatMul, Lt, Le, Gt, Ge, Eq, Ne, And, Or };
const char* binop_symbol(BinOp op);

struct Binary : Expr {
  BinOp op;
  ExprPtr lhs, rhs;
  // + - * / of a tensor and a host int or float computed at run time: the size variable the checker
  // made to carry the number's bits to the operator that makes it a tensor (ir: host_scalar), as a
  // run-time position travels to a slice; 0 for none.
  int64_t scalar_size = 0;
  Binary() : Expr(ExprKind::Binary) {}
  ~Binary() override;
};

struct Pattern;
using PatternPtr = std::unique_ptr<Pattern>;
struct Pattern {
  enum Kind { Wildcard, Bind, Ctor, Tuple } kind;
  std::string name;                 // Bind: variable name; Ctor: constructor name
  LocalVarPtr var;                  // Bind
  const CtorDef* ctor = nullptr;    // Ctor, set by the checker
  std::vector<PatternPtr> subs;     // Ctor fields, Tuple elements
  bool has_parens = false;          // Ctor written as `C(...)` rather than `C`
  Span span;
  Type type;                        // set by the checker
};

struct Let : Expr {
  PatternPtr pattern;
  TypeExprPtr annotation;  // optional
  ExprPtr value, body;
  Let() : Expr(ExprKind::Let) {}
  ~Let() override;
};

struct If : Expr {
  ExprPtr cond, then_branch, else_branch;
  If() : Expr(ExprKind::If) {}
  ~If() override;
};

// Chains that are not nesting: a sequence of lets (each the body of the one before), an else-if
// chain (each the else branch of the one before) and a chain of binary operators (`a + b - c`: each
// the left operand of the one after). Their length is the program's length, not its depth, so every
// walker of the tree goes along them with a loop over these lists, never by recursion, and their
// destructors unlink them one node at a time. Each list starts at `e` (of that kind) and runs
// outermost first while the next node is of the same kind: for a binary chain the last element's
// lhs is the first operand.
template <class E> auto let_chain(E& e);
template <class E> auto if_chain(E& e);
template <class E> auto binary_chain(E& e);

// The value of a number written in the source: a literal, or `-` before one (`x * -2.0`); nullopt
// for any other expression. Such a number with a tensor is a constant, not a run-time scalar.
std::optional<double> literal_number(const Expr& e);

struct Clause {
  PatternPtr pattern;
  ExprPtr body;
};

struct Match : Expr {
  ExprPtr scrutinee;
  std::vector<Clause> clauses;
  Match() : Expr(ExprKind::Match) {}
};

struct FuncParam {
  std::string name;
  TypeExprPtr type_expr;  // optional for lambdas
  LocalVarPtr var;
  Span span;
};

struct Lambda : Expr {
  std::vector<FuncParam> params;
  TypeExprPtr ret_expr;  // optional
  ExprPtr body;
  std::vector<LocalVarPtr> captures;  // set by the checker: free locals the body uses, in order
  Lambda() : Expr(ExprKind::Lambda) {}
};

// ---- Top-level declarations ---------------------------------------------------------------------
struct DimDecl {
  std::string name;
  DimExprPtr value;
  int64_t resolved = 0;  // after --set overrides and evaluation
  bool overridden = false;
  Span span;
};

struct ParamDecl {
  std::string name;
  bool frozen = false;  // `param frozen mask: ...`: training leaves it as it is
  DimExprPtr count;  // set for an indexed param `emb[V]: f32[1, H]`
  TypeExprPtr type_expr;
  int64_t resolved_count = 0;      // 0 for a plain param
  std::vector<int64_t> shape;      // element shape
  Span span;
};

struct CtorSyntax {
  std::string name;
  std::vector<TypeExprPtr> fields;
  Span span;
};

struct TypeDecl {
  std::string name;
  std::vector<std::string> type_params;
  std::vector<CtorSyntax> ctors;
  Span span;
  std::unique_ptr<AdtDef> def;  // built by the checker
};

struct FuncDecl {
  std::string name;
  std::vector<std::string> type_params;
  std::vector<FuncParam> params;
  TypeExprPtr ret_expr;
  ExprPtr body;
  Span span;
  Type type;  // fn(params) -> ret, set by the checker; may mention type_params as Param types
  // The size variables its parameter types bind (`n` in `x: f32[n, D]`), in order of first
  // appearance, as shape entries (types.h): set by the checker.
  std::vector<int64_t> size_params;
  // The sizes its result makes (`m` in `-> f32[m, D]`, named by no parameter): each call gets
  // fresh ones, which the callee's body binds where it returns. Set by the checker, with the
  // expressions the body returns (its tail positions through let, if and match) and what each
  // made size is there; lowering returns those values beside the result.
  std::vector<int64_t> made_sizes;
  std::map<const Expr*, std::vector<int64_t>> made_at;
};

struct Module {
  std::vector<std::string> files;  // the prelude first, then the user's file
  std::vector<std::unique_ptr<DimDecl>> dims;
  std::vector<std::unique_ptr<ParamDecl>> params;
  std::vector<std::unique_ptr<TypeDecl>> types;
  std::vector<std::unique_ptr<FuncDecl>> funcs;
  // The names of the size variables the checker made, by index (types.h; SizeNamesScope).
  std::vector<std::string> size_names;
  SizeSums size_sums;  // the sizes concat joins (types.h), set by the checker
  // Positions computed at run time (`i` in slice(x, i, i + 1)): the size variable that stands for
  // each host int variable, set by the checker.
  std::map<int64_t, const LocalVar*> run_time_sizes;

  const FuncDecl* find_func(const std::string& name) const;
  const AdtDef* find_adt(const std::string& name) const;
};

namespace detail {
template <class E, class N>
using Like = std::conditional_t<std::is_const_v<E>, const N, N>;  // N, const when E is
template <class N, class E>
std::vector<N*> chain(E& first, ExprKind kind, ExprPtr std::remove_const_t<N>::*next) {
  std::vector<N*> out;
  for (Like<E, Expr>* e = &first; e && e->kind == kind; e = (static_cast<N*>(e)->*next).get())
    out.push_back(static_cast<N*>(e));
  return out;
}
}  // namespace detail

template <class E> auto let_chain(E& e) {
  return detail::chain<detail::Like<E, Let>>(e, ExprKind::Let, &Let::body);
}
template <class E> auto if_chain(E& e) {
  return detail::chain<detail::Like<E, If>>(e, ExprKind::If, &If::else_branch);
}
template <class E> auto binary_chain(E& e) {
  return detail::chain<detail::Like<E, Binary>>(e, ExprKind::Binary, &Binary::lhs);
}

// Prints the module back as source-like text with types where known (`--emit ast`).
std::string print_ast(const Module& module);

}  // namespace acrobat::ast
