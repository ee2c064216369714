// Programs the checker must accept, and the types it must give them.
#include "lang_test_util.h"

namespace acrobat::test {
namespace {

const ir::Function& function(const ir::Module& m, const std::string& name) {
  int f = m.find_function(name);
  if (f < 0) throw std::runtime_error("no function " + name);
  return m.functions[f];
}

// The type of the variable `name` of function `fn` (its first one of that name).
std::string var_type(const ir::Module& m, const std::string& fn, const std::string& name) {
  for (const auto& v : function(m, fn).vars)
    if (v.name == name) return type_str(v.type);
  return "<no variable " + name + ">";
}

std::string signature(const ir::Module& m, const std::string& fn) {
  const auto& f = function(m, fn);
  std::vector<Type> params;
  for (int p : f.params) params.push_back(f.vars[p].type);
  return type_str(func_type(params, f.ret));
}

TEST(Check, ShippedModels) {
  for (const char* model : {"models/treelstm.acr", "models/birnn.acr", "models/mvrnn.acr"}) {
    SCOPED_TRACE(model);
    EXPECT_NO_THROW(parse_model_file(source_path(model), {}));
  }
}

// Size variables (`n` in f32[n, D]) flow through operators, annotations and calls: each call
// instantiates the callee's afresh, so one function serves instances of every size.
TEST(Check, SizeVariablesFlowThroughOperatorsAndCalls) {
  auto m = parse_model_text("ragged.acr", R"(
dim D = 8
param Wq: f32[D, D]
param g: f32[D]
param b: f32[D]
def attend(q: f32[k, D], v: f32[k, D]) -> f32[k, D] { softmax(q @ transpose(v) * 0.125) @ v }
def both(x: f32[n, D], y: f32[m, D]) -> (f32[n, D], f32[m, D]) { (attend(x, x), attend(y, y)) }
def main(x: f32[n, D]) -> (f32[n, D], f32[1, D], f32[n, n], (f32[n, D], f32[1, D])) {
  let q: f32[n, D] = x @ Wq;
  let s = q @ transpose(x);
  let y = layer_norm(attend(q, x) + x, g, b);
  (y, mean(y, axis=0), s, both(x, sum(x, axis=0)))
}
)",
                             {});
  SizeNamesScope names(m->size_names);
  auto type_of = [&](const char* fn) { return type_str(m->find_func(fn)->type); };
  EXPECT_EQ(type_of("attend"), "fn(f32[k, 8], f32[k, 8]) -> f32[k, 8]");
  EXPECT_EQ(type_of("both"), "fn(f32[n, 8], f32[m, 8]) -> (f32[n, 8], f32[m, 8])");
  EXPECT_EQ(type_str(m->find_func("main")->body->type),
            "(f32[n, 8], f32[1, 8], f32[n, n], (f32[n, 8], f32[1, 8]))");
  EXPECT_EQ(m->find_func("main")->size_params.size(), 1u);
  EXPECT_EQ(m->find_func("both")->size_params.size(), 2u);
}

// Lowering gives each function a host int parameter per size variable, after its own, and every
// call passes the values the checker bound (a constant, or the caller's size variable).
TEST(Check, SizeVariablesBecomeHostIntParameters) {
  auto m = compile_text(
      "def both(a: f32[k, 4], b: f32[j, 4]) -> f32[k, 4] { a + sum(b, axis=0) }\n"
      "def main(p: (f32[n, 4], f32[n, 4])) -> f32[n, 4] { both(p.0, zeros(3, 4)) + p.1 }\n");
  const ir::Function& both = m->functions[m->find_function("both")];
  ASSERT_EQ(both.size_params.size(), 2u);
  EXPECT_EQ(both.declared_params(), 2u);
  EXPECT_EQ(both.vars[both.params[2]].type->kind, TypeKind::Int);
  const ir::Function& main = m->functions[m->find_function("main")];
  ASSERT_EQ(main.size_params.size(), 1u);
  const std::string ir = ir::print_module(*m);
  EXPECT_NE(ir.find("call @both(%"), std::string::npos) << ir;
  EXPECT_NE(ir.find(", %n.1, 3)"), std::string::npos) << ir;  // k = n, j = 3
  EXPECT_NE(ir.find("sizes(n=%n.1)"), std::string::npos) << ir;
}

TEST(Check, GenericFunctionAtSeveralTypes) {
  auto m = compile_text(R"(
def id[a](x: a) -> a { x }
def twice[a](f: fn(a) -> a, x: a) -> a { f(f(x)) }
def main(x: int) -> (int, float, bool, f32[1, 2], List[int], int) {
  let i = id(x);
  let f = id(1.5);
  let b = id(true);
  let t = id(zeros(1, 2));
  let l = id(Cons(x, Nil));
  let g = id(fn(y: int) { y + 1 });
  (i, f, b, t, l, twice(g, x))
}
)");
  EXPECT_EQ(var_type(*m, "main", "i"), "int");
  EXPECT_EQ(var_type(*m, "main", "f"), "float");
  EXPECT_EQ(var_type(*m, "main", "b"), "bool");
  EXPECT_EQ(var_type(*m, "main", "t"), "f32[1, 2]");
  EXPECT_EQ(var_type(*m, "main", "l"), "List[int]");
  EXPECT_EQ(var_type(*m, "main", "g"), "fn(int) -> int");
  // Generic functions stay generic in the IR.
  EXPECT_EQ(signature(*m, "id"), "fn(a) -> a");
  EXPECT_EQ(signature(*m, "twice"), "fn(fn(a) -> a, a) -> a");
  EXPECT_EQ(run_json(m, {4})[0], nlohmann::json::parse(
                                     R"([4, 1.5, true, {"shape": [1, 2], "data": [0.0, 0.0]}, [4], 6])"));
}

TEST(Check, GenericDataTypeWithSeveralParameters) {
  auto m = compile_text(R"(
type Either[a, b] = Left(a) | Right(b)
def either[a, b, c](e: Either[a, b], f: fn(a) -> c, g: fn(b) -> c) -> c {
  match e { Left(x) => f(x), Right(y) => g(y) }
}
def main(e: Either[int, float]) -> float {
  either(e, fn(i) { 0.5 }, fn(x) { x * 2.0 })
}
)");
  EXPECT_EQ(var_type(*m, "main$lambda0", "i"), "int");
  EXPECT_EQ(var_type(*m, "main$lambda1", "x"), "float");
  EXPECT_EQ(run_json(m, {nlohmann::json::parse(R"({"Left": [3]})"),
                         nlohmann::json::parse(R"({"Right": [1.25]})")}),
            nlohmann::json({0.5, 2.5}));
}

TEST(Check, MutualRecursion) {
  auto m = compile_text(R"(
def even(n: int) -> bool { if n == 0 { true } else { odd(n - 1) } }
def odd(n: int) -> bool { if n == 0 { false } else { even(n - 1) } }
def main(n: int) -> (bool, bool) { (even(n), odd(n)) }
)");
  EXPECT_EQ(run_json(m, {0, 7, 10}),
            nlohmann::json::parse("[[true, false], [false, true], [true, false]]"));
}

TEST(Check, BaseCaseBehindShortCircuit) {
  // The right operand of || may not run, so the recursion has a way out.
  auto m = compile_text(R"(
def any_zero(xs: List[int]) -> bool {
  match xs { Nil => false, Cons(x, rest) => x == 0 || any_zero(rest) }
}
def count_down(n: int) -> bool { n <= 0 || count_down(n - 1) }
def main(xs: List[int]) -> (bool, bool) { (any_zero(xs), count_down(length(xs))) }
)");
  EXPECT_EQ(run_json(m, {{1, 0, 2}, {1, 2}}),
            nlohmann::json::parse("[[true, true], [false, true]]"));
}

TEST(Check, LambdasWithAndWithoutAnnotations) {
  auto m = compile_text(R"(
def main(xs: List[int]) -> (List[int], List[int], List[bool], int, float) {
  let inferred = map(fn(x) { x + 1 }, xs);
  let annotated = map(fn(x: int) -> int { x * 2 }, xs);
  let to_bool = map(fn(x: int) { x > 1 }, xs);
  let f = fn(a: int, b: int) -> int { a - b };
  let g = fn(y: float) { y / 4.0 };
  (inferred, annotated, to_bool, f(10, 3), g(2.0))
}
)");
  EXPECT_EQ(var_type(*m, "main$lambda0", "x"), "int");
  EXPECT_EQ(var_type(*m, "main", "f"), "fn(int, int) -> int");
  EXPECT_EQ(var_type(*m, "main", "g"), "fn(float) -> float");
  EXPECT_EQ(run_json(m, {{1, 2}})[0],
            nlohmann::json::parse("[[2, 3], [2, 4], [false, true], 7, 0.5]"));
}

TEST(Check, LambdaParametersLearnFromTheOtherArguments) {
  // foldl(f, init, xs): f's parameter types come from init and xs, which follow it, and from there
  // the tensor operations in the lambda's body type-check.
  auto m = compile_text(R"(
dim H = 3
param U: f32[H, H]
def main(xs: List[f32[1, H]]) -> (f32[1, H], List[f32[1, 1]]) {
  let h = foldl(fn(h, x) { tanh(h @ U + x) }, zeros(1, H), xs);
  let sums = zip_with(fn(a, b) { sum(a * b) }, xs, reverse(xs));
  (h, sums)
}
)");
  EXPECT_EQ(var_type(*m, "main$lambda0", "h"), "f32[1, 3]");
  EXPECT_EQ(var_type(*m, "main$lambda0", "x"), "f32[1, 3]");
  EXPECT_EQ(var_type(*m, "main$lambda1", "a"), "f32[1, 3]");
  EXPECT_EQ(signature(*m, "main$lambda1"), "fn(f32[1, 3], f32[1, 3]) -> f32[1, 1]");
}

TEST(Check, ZipWith) {
  auto m = compile_text(R"(
def main(p: (List[int], List[float])) -> List[(int, float)] {
  let (xs, ys) = p;
  zip_with(fn(x, y) { (x * 2, y) }, xs, ys)
}
)");
  // The result is as long as the shorter list.
  EXPECT_EQ(run_json(m, {nlohmann::json::parse("[[1, 2, 3], [0.5, 1.5]]")})[0],
            nlohmann::json::parse("[[2, 0.5], [4, 1.5]]"));
}

TEST(Check, NestedPatterns) {
  auto m = compile_text(R"(
def shape(t: Tree) -> int {
  match t {
    Node(Leaf(a), Leaf(b)) => a + b,
    Node(Node(_, _), Leaf(w)) => 100 + w,
    Node(l, r) => 1000 + shape(l) + shape(r),
    Leaf(w) => w,
  }
}
def firsts(p: (List[int], (int, List[int]))) -> int {
  match p {
    (Cons(x, _), (_, Cons(y, _))) => x * 10 + y,
    (_, (k, _)) => k,
  }
}
def main(t: Tree) -> (int, int) { (shape(t), firsts((Cons(1, Nil), (5, Cons(2, Nil))))) }
)");
  auto tree = nlohmann::json::parse(
      R"({"Node": [{"Node": [{"Node": [{"Leaf": [1]}, {"Leaf": [2]}]}, {"Leaf": [3]}]}, {"Leaf": [4]}]})");
  // Outer node: Node(Node(..), Leaf 4) -> 100 + 4.
  EXPECT_EQ(run_json(m, {tree})[0], nlohmann::json({104, 12}));
  auto other = nlohmann::json::parse(
      R"({"Node": [{"Leaf": [4]}, {"Node": [{"Leaf": [1]}, {"Leaf": [2]}]}]})");
  EXPECT_EQ(run_json(m, {other})[0], nlohmann::json({1000 + 4 + 3, 12}));
}

TEST(Check, Shadowing) {
  auto m = compile_text(R"(
dim H = 2
def main(x: int) -> (int, int, int, int) {
  let x = x + 1;
  let x = x * 10;
  let length = 7;
  let tanh = fn(v: int) { v - 1 };
  let H = 100;
  let y = { let x = 1; x + 1 };
  (x + y, length, tanh(5), H)
}
)");
  EXPECT_EQ(run_json(m, {2})[0], nlohmann::json({32, 7, 4, 100}));
}

TEST(Check, ElseIfChains) {
  auto m = compile_text(R"(
def grade(n: int) -> int {
  if n >= 90 { 4 } else if n >= 80 { 3 } else if n >= 70 { 2 } else if n >= 60 { 1 } else { 0 }
}
def main(n: int) -> int { grade(n) }
)");
  EXPECT_EQ(run_json(m, {95, 85, 75, 65, 5}), nlohmann::json({4, 3, 2, 1, 0}));
}

TEST(Check, UpperCaseNamesBindVariablesUnlessTheyAreConstructors) {
  auto m = compile_text(R"(
def main(p: (int, Tree)) -> int {
  let (A, t) = p;
  match t { Leaf(W) => A + W, Node(_, _) => A }
}
)");
  EXPECT_EQ(run_json(m, {nlohmann::json::parse(R"([1, {"Leaf": [2]}])")})[0], 3);
}

TEST(Check, ConstructorsAndFunctionsAsValues) {
  auto m = compile_text(R"(
def inc(x: int) -> int { x + 1 }
def main(xs: List[int]) -> (List[Tree], List[int]) { (map(Leaf, xs), map(inc, xs)) }
)");
  EXPECT_EQ(run_json(m, {{1, 2}})[0],
            nlohmann::json::parse(R"([[{"Leaf": [1]}, {"Leaf": [2]}], [2, 3]])"));
}

TEST(Check, TypeNamedLikeItsConstructor) {
  auto m = compile_text(R"(
type Point = Point(float, float)
def norm1(p: Point) -> float {
  let Point(x, y) = p;
  (if x < 0.0 { -x } else { x }) + (if y < 0.0 { -y } else { y })
}
def main(p: Point) -> float { norm1(p) }
)");
  EXPECT_EQ(run_json(m, {nlohmann::json::parse(R"({"Point": [-1.5, 2.0]})")})[0], 3.5);
}

TEST(Check, NestedTupleProjection) {
  // `t.0.1` is two projections (the lexer must not read `0.1` as a float).
  auto m = compile_text("def main(x: int) -> int { let t = ((1, x), 3); t.0.1 + t.1 }");
  EXPECT_EQ(run_json(m, {5})[0], 8);
}

TEST(Check, FunctionsReturningClosures) {
  auto m = compile_text(R"(
def adder(k: int) -> fn(int) -> int { fn(x: int) { x + k } }
def compose(f: fn(int) -> int, g: fn(int) -> int) -> fn(int) -> int { fn(x: int) { g(f(x)) } }
def main(x: int) -> int { compose(adder(10), adder(x))(1) + adder(100)(x) }
)");
  EXPECT_EQ(run_json(m, {5})[0], (1 + 10 + 5) + (100 + 5));
}

TEST(Check, IndexedParamsAndDims) {
  auto m = compile_text(R"(
dim H = 2
dim V = 3 * H - 1
param emb[V]: f32[1, H]
def main(w: int) -> (f32[1, H], int) { (emb[w % V], V) }
)");
  EXPECT_EQ(m->params[0].count, 5);
  EXPECT_EQ(run_json(m, {7})[0][1], 5);
}

}  // namespace
}  // namespace acrobat::test
