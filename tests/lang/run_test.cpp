// Programs run with the reference engine on values built in the test: host arithmetic, the prelude's
// list functions, closures, tensor operators against values computed here, and run-time errors.
#include <cmath>

#include "io/safetensors.h"
#include "lang_test_util.h"

namespace acrobat::test {
namespace {

using nlohmann::json;

// The flat data of a tensor in an output.
std::vector<double> data_of(const json& tensor) { return tensor.at("data").get<std::vector<double>>(); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Run, HostIntArithmetic) {
  auto m = compile_text(R"(
def main(x: int) -> (int, int, int, int, int, int, int) {
  (x / 2, x % 3, -x / 2, -x % 3, 1 + 2 * 3 - 4, 10 - 3 - 2, 100 / 10 / 5)
}
)");
  // Division truncates toward zero, as in C.
  EXPECT_EQ(run_json(m, {7})[0], json({3, 1, -3, -1, 3, 5, 2}));
}

TEST(Run, HostFloatAndBool) {
  auto m = compile_text(R"(
def main(x: float) -> (float, float, bool, bool, bool, bool) {
  (x * 4.0 - 1.0, -x / 2.0, x > 2.0, x <= 2.5, x == 2.5 && !(x != 2.5), false || x < 0.0)
}
)");
  EXPECT_EQ(run_json(m, {2.5})[0], json({9.0, -1.25, true, true, true, false}));
}

TEST(Run, ShortCircuitSkipsTheRightOperand) {
  // 10 / x is never evaluated when x == 0.
  auto m = compile_text(R"(
def main(x: int) -> (bool, bool) { (x != 0 && 10 / x > 1, x == 0 || 10 / x > 1) }
)");
  EXPECT_EQ(run_json(m, {0, 5}), json::parse("[[false, true], [true, true]]"));
}

TEST(Run, ListFunctions) {
  auto m = compile_text(R"(
def main(xs: List[int]) -> (List[int], int, int, List[int], int, List[int], List[int]) {
  (map(fn(x) { x * x }, xs),
   foldl(fn(acc, x) { acc * 10 + x }, 0, xs),
   foldr(fn(x, acc) { acc * 10 + x }, 0, xs),
   reverse(xs),
   length(xs),
   zip_with(fn(a, b) { a - b }, xs, reverse(xs)),
   zip_with(fn(a, b) { a * b }, xs, Cons(10, Nil)))
}
)");
  auto out = run_json(m, {{1, 2, 3}, json::array()});
  EXPECT_EQ(out[0], json::parse("[[1, 4, 9], 123, 321, [3, 2, 1], 3, [-2, 0, 2], [10]]"));
  EXPECT_EQ(out[1], json::parse("[[], 0, 0, [], 0, [], []]"));
}

TEST(Run, ListsOfTuplesAndTrees) {
  auto m = compile_text(R"(
def leaves(t: Tree) -> List[int] {
  match t {
    Leaf(w) => Cons(w, Nil),
    Node(l, r) => foldr(fn(x, acc) { Cons(x, acc) }, leaves(r), leaves(l)),
  }
}
def main(t: Tree) -> List[(int, int)] {
  let ws = leaves(t);
  zip_with(fn(i, w) { (i, w) }, map(fn(w) { length(ws) - w }, ws), ws)
}
)");
  auto tree = json::parse(R"({"Node": [{"Node": [{"Leaf": [1]}, {"Leaf": [2]}]}, {"Leaf": [3]}]})");
  EXPECT_EQ(run_json(m, {tree})[0], json::parse("[[2, 1], [1, 2], [0, 3]]"));
}

TEST(Run, ClosuresCaptureValuesAtCreation) {
  auto m = compile_text(R"(
def make(k: int) -> List[fn(int) -> int] {
  let a = fn(x: int) { x + k };
  let k = k * 100;
  let b = fn(x: int) { x + k };
  Cons(a, Cons(b, Nil))
}
def main(x: int) -> List[int] {
  let offset = 1;
  map(fn(f) { f(x) + offset }, make(3))
}
)");
  // a captured k = 3; b captured the shadowing k = 300.
  EXPECT_EQ(run_json(m, {10})[0], json({14, 311}));
}

TEST(Run, ClosureCapturesTensor) {
  auto m = compile_text(R"(
def main(xs: List[f32[1, 2]]) -> List[f32[1, 2]] {
  let shift = ones(1, 2) * 0.5;
  map(fn(x) { x + shift }, xs)
}
)");
  auto out = run_json(m, {json::parse("[[[1, 2]], [[-1, 0]]]")})[0];
  ASSERT_EQ(out.size(), 2u);
  expect_near(data_of(out[0]), {1.5, 2.5});
  expect_near(data_of(out[1]), {-0.5, 0.5});
}

TEST(Run, Softmax) {
  auto m = compile_text(R"(
def main(x: f32[1, 3]) -> (f32[1, 3], f32[1, 3], f32[1, 1], float, int) {
  let p = softmax(x);
  (p, log_softmax(x), sum(p), item(max(x)), argmax(x))
}
)");
  auto out = run_json(m, {json::parse("[[1.0, 2.0, 3.0]]")})[0];
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expect_near(data_of(out[0]), {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z});
  expect_near(data_of(out[1]), {1.0 - std::log(z), 2.0 - std::log(z), 3.0 - std::log(z)});
  expect_near(data_of(out[2]), {1.0});
  EXPECT_EQ(out[3], 3.0);
  EXPECT_EQ(out[4], 2);
}

// Along the rows (axis 0, or -2) of a matrix and of each matrix of a stack: every column its own
// distribution.
TEST(Run, SoftmaxAlongAnyAxisOfAMatrix) {
  auto m = compile_text(R"(
def main(x: f32[3, 2]) -> (f32[3, 2], f32[3, 2], f32[2, 3, 1]) {
  (softmax(x, axis=0), log_softmax(x, axis=-2), softmax(heads(x, 2), axis=1))
}
)");
  const std::vector<std::vector<double>> x = {{1.0, -1.0}, {2.0, 0.5}, {0.0, 3.0}};
  auto out = run_json(m, {json::parse("[[1.0, -1.0], [2.0, 0.5], [0.0, 3.0]]")})[0];
  std::vector<double> p(6), lp(6), stacked(6);
  for (size_t j = 0; j < 2; ++j) {
    const double z = std::exp(x[0][j]) + std::exp(x[1][j]) + std::exp(x[2][j]);
    for (size_t i = 0; i < 3; ++i) {
      p[i * 2 + j] = std::exp(x[i][j]) / z;
      lp[i * 2 + j] = x[i][j] - std::log(z);
      stacked[j * 3 + i] = p[i * 2 + j];  // head j is column j: [2, 3, 1]
    }
  }
  expect_near(data_of(out[0]), p);
  expect_near(data_of(out[1]), lp);
  expect_near(data_of(out[2]), stacked);
}

// Along a stack's first axis (across its matrices: attention weights across heads).
TEST(Run, SoftmaxAlongTheFirstAxisOfAStack) {
  auto m = compile_text(R"(
def main(x: f32[3, 2]) -> (f32[2, 3, 1], f32[2, 3, 1]) {
  let s = heads(x, 2);
  (softmax(s, axis=0), log_softmax(s * 10.0, axis=-3))
}
)");
  const std::vector<std::vector<double>> x = {{1.0, -1.0}, {2.0, 0.5}, {0.0, 3.0}};
  auto out = run_json(m, {json::parse("[[1.0, -1.0], [2.0, 0.5], [0.0, 3.0]]")})[0];
  std::vector<double> p(6), lp(6);
  for (size_t i = 0; i < 3; ++i) {  // row i's two heads
    const double z = std::exp(x[i][0]) + std::exp(x[i][1]);
    const double big = std::max(x[i][0], x[i][1]) * 10.0;
    const double z10 = std::exp(x[i][0] * 10.0 - big) + std::exp(x[i][1] * 10.0 - big);
    for (size_t j = 0; j < 2; ++j) {
      p[j * 3 + i] = std::exp(x[i][j]) / z;
      lp[j * 3 + i] = x[i][j] * 10.0 - big - std::log(z10);
    }
  }
  expect_near(data_of(out[0]), p);
  expect_near(data_of(out[1]), lp, 1e-4);
}

// A host int or float the run computes, with a tensor of a fixed size or of the instance's: an f32
// scalar that broadcasts (an int converted to float first).
TEST(Run, HostNumbersScaleTensors) {
  auto m = compile_text(R"(
def main(x: (f32[n, 2], int)) -> (f32[n, 2], f32[1, 2], f32[1, 1]) {
  let (v, k) = x;
  let s = item(sum(sum(v, axis=0), axis=1));
  (v * (1.0 / float(k)) + k, k - slice(v, 0, 1, axis=0) * s, ones(1, 1) * -s)
}
)");
  auto out = run_json(m, {json::parse("[[[1.0, 2.0], [3.0, -4.0]], 4]")})[0];
  expect_near(data_of(out[0]), {4.25, 4.5, 4.75, 3.0});
  expect_near(data_of(out[1]), {4.0 - 2.0, 4.0 - 4.0});  // s = 2
  expect_near(data_of(out[2]), {-2.0});
}

// A negative number written in the source is a constant, as a positive one is: no run-time scalar.
TEST(Run, NegativeLiteralsWithTensorsAreConstants) {
  auto m = compile_text("def main(x: f32[n, 2]) -> f32[n, 2] { x * -2.0 + -1 }\n");
  const std::string ir = ir::print_module(*m);
  EXPECT_EQ(ir.find("host_scalar"), std::string::npos) << ir;
  EXPECT_NE(ir.find("constant(value=-2.0)"), std::string::npos) << ir;
  auto out = run_json(m, {json::parse("[[1.0, 2.0], [3.0, -4.0]]")})[0];
  expect_near(data_of(out), {-3.0, -5.0, -7.0, 7.0});
}

TEST(Run, ElementwiseReductionsAndDataMovement) {
  auto m = compile_text(R"(
def main(x: f32[2, 3]) -> (f32[2, 3], f32[1, 3], f32[2, 1], f32[3, 2], f32[2, 6], f32[2, 1], f32[1, 3]) {
  let (a, b, c) = split(x, 3);
  (relu(x) * 2.0 - 1.0,
   mean(x, axis=0),
   max(x),
   transpose(x),
   concat(x, x),
   b,
   slice(x, 1, 2, axis=0))
}
)");
  auto out = run_json(m, {json::parse("[[1, -2, 3], [-4, 5, 6]]")})[0];
  expect_near(data_of(out[0]), {1, -1, 5, -1, 9, 11});
  expect_near(data_of(out[1]), {-1.5, 1.5, 4.5});
  expect_near(data_of(out[2]), {3, 6});
  expect_near(data_of(out[3]), {1, -4, -2, 5, 3, 6});
  expect_near(data_of(out[4]), {1, -2, 3, 1, -2, 3, -4, 5, 6, -4, 5, 6});
  expect_near(data_of(out[5]), {-2, 5});
  expect_near(data_of(out[6]), {-4, 5, 6});
}

TEST(Run, LayerNormAndActivations) {
  auto m = compile_text(R"(
def main(x: f32[1, 4]) -> (f32[1, 4], f32[1, 4], f32[1, 4]) {
  (layer_norm(x, ones(1, 4), zeros(4)), sigmoid(x), exp(log(x + 10.0)) - 10.0)
}
)");
  auto out = run_json(m, {json::parse("[[1, 2, 3, 4]]")})[0];
  double mean = 2.5, var = 1.25;  // population variance
  std::vector<double> ln, sig;
  for (double v : {1.0, 2.0, 3.0, 4.0}) {
    ln.push_back((v - mean) / std::sqrt(var + 1e-5));
    sig.push_back(1.0 / (1.0 + std::exp(-v)));
  }
  expect_near(data_of(out[0]), ln, 1e-4);
  expect_near(data_of(out[1]), sig);
  expect_near(data_of(out[2]), {1, 2, 3, 4}, 1e-4);
}

// A model whose params come from a small safetensors file written here.
class RunWithParams : public ::testing::Test {
 protected:
  std::shared_ptr<const ParamStore> load(const ir::Module& m) {
    std::string path = dir_.path("params.safetensors");
    io::write_safetensors(
        path, {io::NamedTensor{"W", {3, 2}, {1, 2, 3, 4, 5, 6}},
               io::NamedTensor{"b", {2}, {0.5f, -0.5f}},  // f32[1, 2] may be stored as [2]
               io::NamedTensor{"emb", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}}});
    return std::make_shared<ParamStore>(load_params(m, path));
  }
  TempDir dir_;
};

constexpr const char* kAffine = R"(
dim V = 4
param W: f32[3, 2]
param b: f32[1, 2]
param emb[V]: f32[1, 3]
def main(words: List[int]) -> List[f32[1, 2]] { map(fn(w) { emb[w] @ W + b }, words) }
def direct(x: f32[2, 3]) -> f32[2, 2] { x @ W + b }
)";

TEST_F(RunWithParams, MatmulOfKnownMatrices) {
  auto m = compile_text(kAffine);
  auto params = load(*m);
  // [[1, 0, -1], [2, 1, 0]] @ [[1, 2], [3, 4], [5, 6]] = [[-4, -4], [5, 8]], plus b.
  auto out = run_json(m, {json::parse("[[1, 0, -1], [2, 1, 0]]")}, params, "direct")[0];
  EXPECT_EQ(out["shape"], json({2, 2}));
  expect_near(data_of(out), {-3.5, -4.5, 5.5, 7.5});
}

TEST_F(RunWithParams, EmbeddingRowsTimesMatrix) {
  auto m = compile_text(kAffine);
  auto params = load(*m);
  auto out = run_json(m, {{0, 2, 3}}, params)[0];
  ASSERT_EQ(out.size(), 3u);
  expect_near(data_of(out[0]), {1.5, 1.5});    // row [1, 0, 0] -> [1, 2]
  expect_near(data_of(out[1]), {5.5, 5.5});    // row [0, 0, 1] -> [5, 6]
  expect_near(data_of(out[2]), {9.5, 11.5});   // row [1, 1, 1] -> [9, 12]
}

// ---- run-time errors: a UserError naming the source position and the instance ----------------

// Runs `entry` on the instances and returns the error it must fail with.
UserError run_error(const std::string& text, const std::vector<json>& instances,
                    std::shared_ptr<const ParamStore> params = nullptr) {
  auto m = compile_text(text, {}, "runtime.acr");
  return user_error_of([&] { run_json(m, instances, params); });
}

void expect_runtime_error(const UserError& e, uint32_t line, uint32_t col, int instance,
                          const std::string& phrase) {
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  const Diagnostic& d = e.diagnostics()[0];
  EXPECT_EQ(d.loc.file, "runtime.acr") << e.what();
  EXPECT_EQ(d.loc.line, line) << e.what();
  EXPECT_EQ(d.loc.col, col) << e.what();
  EXPECT_EQ(d.message.rfind("instance " + std::to_string(instance) + ": ", 0), 0u) << e.what();
  EXPECT_NE(d.message.find(phrase), std::string::npos) << e.what();
}

TEST(RunErrors, IntegerDivisionByZero) {
  auto e = run_error("def main(x: int) -> int {\n  100 / (x - 3)\n}\n", {1, 3, 2});
  expect_runtime_error(e, 2, 3, 1, "integer division by zero");
}

TEST(RunErrors, IntegerModuloByZero) {
  auto e = run_error("def main(x: int) -> int { let y = x % 0; y }\n", {4});
  expect_runtime_error(e, 1, 35, 0, "integer division by zero");
}

TEST(RunErrors, IntegerDivisionOverflow) {
  auto e = run_error("def main(x: int) -> int { (-9223372036854775807 - 1) / x }\n", {1, -1});
  expect_runtime_error(e, 1, 28, 1, "integer division overflows");  // inside the parentheses
}

TEST(RunErrors, ParamIndexOutOfRange) {
  const std::string model =
      "dim V = 4\nparam emb[V]: f32[1, 2]\n"
      "def main(ws: List[int]) -> List[f32[1, 2]] {\n  map(fn(w) { emb[w] }, ws)\n}\n";
  expect_runtime_error(run_error(model, {{0, 3}, {1, 4, 2}}), 4, 15, 1,
                       "index 4 is out of range for param 'emb' of 4 entries");
  expect_runtime_error(run_error(model, {{-1}}), 4, 15, 0,
                       "index -1 is out of range for param 'emb' of 4 entries");
}

TEST(RunErrors, RecursionTooDeep) {
  const std::string model =
      "def count(n: int) -> int {\n  if n == 0 { 0 } else { 1 + count(n - 1) }\n}\n"
      "def main(n: int) -> int { count(n) }\n";
  auto m = compile_text(model, {}, "runtime.acr");
  // Just within the bound: main plus count(n) ... count(0) make n + 2 nested calls.
  int fits = ReferenceEngine::kMaxCallDepth - 2;
  EXPECT_EQ(run_json(m, {fits})[0], fits);
  auto e = run_error(model, {10, ReferenceEngine::kMaxCallDepth});
  expect_runtime_error(e, 2, 30, 1,
                       "recursion deeper than " + std::to_string(ReferenceEngine::kMaxCallDepth) +
                           " calls (in 'count')");
}

TEST(RunErrors, DeepRecursionThroughClosures) {
  // The prelude's map on a long list recurses once per element, through a closure call each time.
  const std::string model = "def main(n: int) -> int { length(map(fn(x) { x + n }, build(n))) }\n"
                            "def build(n: int) -> List[int] {\n"
                            "  if n == 0 { Nil } else { Cons(n, build(n - 1)) }\n}\n";
  auto e = run_error(model, {ReferenceEngine::kMaxCallDepth + 1000});
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  EXPECT_NE(e.diagnostics()[0].message.find("instance 0: recursion deeper than"), std::string::npos)
      << e.what();
  EXPECT_TRUE(e.diagnostics()[0].loc.known()) << e.what();
}

}  // namespace
}  // namespace acrobat::test
