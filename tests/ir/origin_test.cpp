// Function::origin: what lowering, specialisation and the reuse analysis record about where each
// function came from, and that the reuse analysis reads it rather than the functions' names.
#include "analysis/reuse.h"
#include "lang/lang_test_util.h"
#include "transforms/specialise.h"

namespace acrobat::test {
namespace {

using Kind = ir::FunctionOrigin::Kind;

// A user function (cell) cloned for two weights, prelude functions (length, foldl, ...), a lambda
// specialised into foldl, and constructors of a user and of a prelude data type used as values.
const std::string kModel = R"(
param emb[10]: f32[1, 4]
param W1: f32[4, 4]
param W2: f32[4, 4]
type Word = Word(int)
def cell(U: f32[4, 4], h: f32[1, 4]) -> f32[1, 4] { tanh(h @ U) }
def main(xs: List[int]) -> f32[1, 4] {
  let words = map(Word, foldr(Cons, Nil, xs));
  let h0 = cell(W2, tanh(emb[length(words) % 10]));
  foldl(fn(h, x) { cell(W1, h) }, h0, xs)
}
)";

// "kind" or "kind of @from" for the function called `name`.
std::string origin(const ir::Module& m, const std::string& name) {
  int f = m.find_function(name);
  if (f < 0) return "<no function " + name + ">";
  const ir::FunctionOrigin& o = m.functions[f].origin;
  std::string kind = ir::origin_kind_name(o.kind);
  return o.from < 0 ? kind : kind + " of @" + m.functions[o.from].name;
}

TEST(Origin, EveryKindThroughThePipeline) {
  auto m = compile_text(kModel);
  EXPECT_EQ(origin(*m, "main"), "user");
  EXPECT_EQ(origin(*m, "cell"), "user");
  EXPECT_EQ(origin(*m, "Word"), "user");  // the constructor of a user data type, as a value
  EXPECT_EQ(origin(*m, "length"), "prelude");
  EXPECT_EQ(origin(*m, "foldl"), "prelude");
  EXPECT_EQ(origin(*m, "Cons"), "prelude");
  EXPECT_EQ(origin(*m, "main$lambda0"), "lambda of @main");
  EXPECT_EQ(origin(*m, "foldl$main$lambda0"), "specialisation of @foldl");
  EXPECT_EQ(origin(*m, "map$Word"), "specialisation of @map");
  EXPECT_EQ(origin(*m, "foldr$Cons"), "specialisation of @foldr");
  EXPECT_EQ(origin(*m, "cell$1"), "clone of @cell");
  EXPECT_EQ(origin(*m, "cell$2"), "clone of @cell");
}

TEST(Origin, NestedLambdaComesFromTheLambdaAroundIt) {
  auto m = compile_text(read_text(source_path("tests/golden/nested_lambdas.acr")));
  EXPECT_EQ(origin(*m, "main$lambda0"), "lambda of @main");
  EXPECT_EQ(origin(*m, "main$lambda0$lambda0"), "lambda of @main$lambda0");
}

// The reuse analysis gives an all-scatter entry context to user functions by origin: renaming them
// (a '$' in the name, as copies have) changes nothing, and neither does giving a lambda a plain
// name.
TEST(Origin, ReuseEntriesFollowOriginNotNames) {
  auto analyse = [](bool rename) {
    ir::Module m = lower_to_ir(parse_model_text("test.acr", kModel, {}));
    if (rename) {
      m.functions[m.find_function("cell")].name = "cell$renamed";
      m.functions[m.find_function("main$lambda0")].name = "step";
    }
    analysis::ReuseInfo info =
        analysis::analyse_param_reuse(specialise_higher_order(std::move(m)).module).info;
    std::vector<std::string> out;
    for (const auto& c : info.clones) out.push_back(c.original + " -> " + c.reason);
    return out;
  };
  std::vector<std::string> expected = {"cell -> %U = @W2", "cell -> %U = @W1"};
  EXPECT_EQ(analyse(false), expected);
  EXPECT_EQ(analyse(true),
            (std::vector<std::string>{"cell$renamed -> %U = @W2", "cell$renamed -> %U = @W1"}));
}

}  // namespace
}  // namespace acrobat::test
