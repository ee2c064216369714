// The IR: functions in A-normal form. A block is a straight list of bindings `%v = rhs` ending in an
// atom; every operand is an atom (a variable or a constant), so evaluation order and every
// intermediate value are explicit. Lambdas are lifted into top-level functions that take their
// captured variables first. Nodes are immutable once built and keep the span of the source they
// came from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "types/types.h"

namespace acrobat::ast {
struct Module;
}
namespace acrobat::analysis {
struct Plan;
}

namespace acrobat::ir {

struct Function;

// An operand: a variable of the enclosing function or a constant.
struct Atom {
  enum Kind { Var, Int, Float, Bool, Unit, Func } kind = Unit;
  int var = -1;            // Var: index into Function::vars
  int64_t int_value = 0;   // Int
  double float_value = 0;  // Float
  bool bool_value = false; // Bool
  int func = -1;           // Func: index into Module::functions (a function used as a value)

  static Atom variable(int v) { Atom a; a.kind = Var; a.var = v; return a; }
  static Atom integer(int64_t v) { Atom a; a.kind = Int; a.int_value = v; return a; }
  static Atom floating(double v) { Atom a; a.kind = Float; a.float_value = v; return a; }
  static Atom boolean(bool v) { Atom a; a.kind = Bool; a.bool_value = v; return a; }
  static Atom unit() { return Atom{}; }
  static Atom function(int f) { Atom a; a.kind = Func; a.func = f; return a; }
};

// Host scalar operations (int/float/bool); && and || are lowered to `if`. Length: the number of
// elements of a List (the size of the tensor a list of indices gathers).
// ToFloat and ToInt: float(i) and int(f), the float truncated toward zero. FloatBits: a float's
// IEEE-754 bits as an int, the value of the size variable a host_scalar operator reads. Emit: its
// operand, handed out as a partial result of the instance on the way (emit(v); AotHost::emit); the
// one host operation with an effect, which nothing moves or drops.
enum class HostOp { Add, Sub, Mul, Div, Mod, Neg, Not, Lt, Le, Gt, Ge, Eq, Ne, Length, ToFloat, ToInt, FloatBits, Emit };
const char* host_op_name(HostOp op);

enum class RhsKind {
  Copy,        // an atom
  Op,          // tensor operator from the registry
  Host,        // host scalar operation
  Call,        // call of a known function, or of a closure held in a variable
  Construct,   // ADT constructor application
  MakeTuple,
  Proj,        // tuple field
  ParamLoad,   // a whole param tensor
  ParamIndex,  // one tensor of an indexed param, chosen by a host int (embedding lookup)
  ParamGather, // the rows of an indexed param chosen by a List[int], one after another
               // ([len, E]); args: the list; sizes: len
  MakeClosure, // a lifted lambda with its captured values
  If,
  Match,
};

struct Block;
struct Rhs;
using RhsPtr = std::shared_ptr<const Rhs>;

struct Binding {
  int var;  // the variable this binding defines
  RhsPtr rhs;
};

struct Block {
  std::vector<Binding> bindings;
  Atom result;
};

struct Pattern;
using PatternPtr = std::shared_ptr<const Pattern>;
struct Pattern {
  enum Kind { Wildcard, Bind, Ctor, Tuple } kind;
  int var = -1;                    // Bind
  const CtorDef* ctor = nullptr;   // Ctor
  std::vector<PatternPtr> subs;    // Ctor fields, Tuple elements
};

struct Clause {
  PatternPtr pattern;
  Block body;
};

// The value of a size variable (types.h) where a node needs it: a host int variable of the
// function (a parameter the callers pass, a list's length, a lambda's capture).
struct SizeArg {
  int64_t dim;  // the size variable's shape entry
  Atom value;
};

struct Rhs {
  // The fields a host program reads for every binding come first: they share a cache line.
  RhsKind kind;
  // The node's identity, unique in its module (ir/walk.h number_new_sites): analysis results are
  // tables indexed by it. A node rebuilt in place (a pass changing a field) keeps it; a copy placed
  // beside the original (a clone, a specialisation) gets a new one.
  int site = -1;
  OpId op = OpId::Add;             // Op
  HostOp host_op = HostOp::Add;    // Host
  int callee_func = -1;            // Call of a known function; MakeClosure's lifted function
  int index = 0;                   // Proj field; ParamLoad/ParamIndex param index
  const CtorDef* ctor = nullptr;   // Construct
  std::vector<Atom> args;          // operands of Op, Host, Call, Construct, MakeTuple, MakeClosure
  Atom callee;                     // Call through a variable (closure or function value)

  Type type;  // the type of the bound value
  Span span;
  OpAttrs attrs;                   // Op
  int64_t flops = 0;               // Op: FLOPs of one execution (0 when its shapes have sizes)
  // Op, ParamGather: the values of the size variables in its operand and result types and its
  // attributes, each once.
  std::vector<SizeArg> sizes;
  Block then_block, else_block;    // If (args[0] is the condition)
  std::vector<Clause> clauses;     // Match (args[0] is the scrutinee)
};

// Factories.
RhsPtr make_copy(Atom a, Type t, Span s);
RhsPtr make_op(OpId op, std::vector<Atom> args, OpAttrs attrs, Type t, Span s);
RhsPtr make_host(HostOp op, std::vector<Atom> args, Type t, Span s);
RhsPtr make_call(int func, std::vector<Atom> args, Type t, Span s);
RhsPtr make_indirect_call(Atom callee, std::vector<Atom> args, Type t, Span s);
RhsPtr make_construct(const CtorDef* ctor, std::vector<Atom> args, Type t, Span s);
RhsPtr make_tuple(std::vector<Atom> args, Type t, Span s);
RhsPtr make_proj(Atom tuple, int index, Type t, Span s);
RhsPtr make_param_load(int param, Type t, Span s);
RhsPtr make_param_index(int param, Atom index, Type t, Span s);
RhsPtr make_param_gather(int param, Atom list, SizeArg length, Type t, Span s);
RhsPtr make_closure(int func, std::vector<Atom> captures, Type t, Span s);
RhsPtr make_if(Atom cond, Block then_block, Block else_block, Type t, Span s);
RhsPtr make_match(Atom scrutinee, std::vector<Clause> clauses, Type t, Span s);

struct VarInfo {
  std::string name;  // source name, or "" for a temporary
  Type type;
  Span span;
};

// Where a function came from. Passes that treat kinds of functions differently read this, never the
// name: names are for printing and may change (a copy is named after what it copies).
struct FunctionOrigin {
  enum Kind {
    User,     // declared in the model's file, or a constructor of a data type declared there used
              // as a function value (lowering wraps it in a function)
    Prelude,  // declared in the prelude, or a prelude constructor used as a function value
    Lambda,   // a lambda lifted out of function `from`
    Specialisation,  // a copy of function `from` made by specialise_higher_order
    Clone,           // a copy of function `from` made by the reuse analysis for a calling context
  };
  Kind kind = User;
  int from = -1;  // index into Module::functions for Lambda, Specialisation and Clone; else -1
};
const char* origin_kind_name(FunctionOrigin::Kind kind);  // "user", "prelude", "lambda", ...

struct Function {
  std::string name;  // for printing and lookup by the user (entry functions); see `origin`
  FunctionOrigin origin;
  std::vector<std::string> type_params;
  std::vector<int> params;     // variables bound on entry; for a lifted lambda, captures first
  int num_captures = 0;        // lifted lambdas: how many leading params are captured values
  // The size variables of the parameters' types (`n` in `x: f32[n, D]`), in order: the last
  // size_params.size() params are host ints holding their values, which every call passes (an
  // engine passes the entry function's from the instance's shapes).
  std::vector<int64_t> size_params;
  size_t declared_params() const { return params.size() - size_params.size(); }
  // A function whose result has sizes no parameter names is lowered to two (ir/lower.cpp):
  // NAME$sizes returns (result, the values of made_sizes), and NAME, made_by that one, calls it and
  // returns the result alone; an engine running NAME as its entry runs made_by and reads the
  // output's shapes from the sizes it returns.
  std::vector<int64_t> made_sizes;
  int made_by = -1;
  Type ret;
  Block body;
  std::vector<VarInfo> vars;
  Span span;
};

struct Param {
  std::string name;
  bool frozen = false;  // training leaves it as it is: no gradient written, no step taken
  int64_t count = 0;  // > 0 for an indexed param
  std::vector<int64_t> shape;  // element shape
  Span span;
};

struct Module {
  std::shared_ptr<const ast::Module> source;  // owns the data type definitions
  std::vector<std::pair<std::string, int64_t>> dims;
  SizeSums size_sums;  // the sizes concat joins (types.h): each one's terms, for its value
  std::vector<Param> params;
  std::vector<const AdtDef*> adts;
  std::vector<Function> functions;
  // What the analyses after lowering decided (analysis/plan.h); set by the pipeline, read by the
  // engines. Refers to the functions' IR nodes, which are shared, not copied, with the module.
  std::shared_ptr<const analysis::Plan> plan;
  int num_sites = 0;  // site ids given so far: every node's site is below it

  int find_function(const std::string& name) const;  // -1 when absent
};

// Lines an analysis adds to a printed module where its decisions apply (`acrobat emit ownership`).
// Each function returns whole lines, without indentation or newlines; the printer indents them.
class PrintNotes {
 public:
  virtual ~PrintNotes() = default;
  // Before and after binding `r` of function `func`.
  virtual std::vector<std::string> before(int func, const Rhs& r) const;
  virtual std::vector<std::string> after(int func, const Rhs& r) const;
  // At the start of the body of `func` (owner null) or of branch `branch` of if or match `owner`.
  virtual std::vector<std::string> entry(int func, const Rhs* owner, size_t branch) const;
  // Appended to the line of that block's result.
  virtual std::string result(int func, const Rhs* owner, size_t branch) const;
};

// Prints the module (`--emit ir`, golden tests), with `notes` where given.
std::string print_module(const Module& module, const PrintNotes* notes = nullptr);
// A variable of `f` as print_module names it: %name.N, or %N for a temporary.
std::string var_str(const Function& f, int v);

}  // namespace acrobat::ir
