// The operator registry refuses, when acrobat is built, an elementwise operator without its fused
// SIMD expression or without one adjoint expression per operand: the check of src/ops/ops_check.h
// compiled against the real ops.def and against ones with an extra row that breaks a rule.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace {

const std::string kSource = ACROBAT_SOURCE_DIR;

struct Compiled {
  int status;
  std::string output;
};

// Compiles the registry check over `registry` (the text of an ops.def).
Compiled compile_check(const std::string& registry) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("acrobat_ops_check_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "ops.def") << registry;
  std::ofstream(dir / "check.cpp")
      << "#include \"ops/ops_check.h\"\n"
         "#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint) "
         "ACROBAT_CHECK_OP_ROW(id, name, arity, cls, simd, adjoint)\n"
         "#include \"ops.def\"\n";
  std::string cmd = std::string(ACROBAT_CXX) + " -std=c++20 -fsyntax-only -I" + kSource + "/src -I" +
                    dir.string() + " " + (dir / "check.cpp").string() + " > " +
                    (dir / "out.txt").string() + " 2>&1";
  int status = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(dir / "out.txt").rdbuf();
  fs::remove_all(dir);
  return {status, out.str()};
}

std::string real_registry() {
  std::stringstream s;
  s << std::ifstream(kSource + "/src/ops/ops.def").rdbuf();
  return s.str();
}

TEST(OpsRegistry, TheRealRegistryPassesItsCheck) {
  Compiled c = compile_check(real_registry());
  EXPECT_EQ(c.status, 0) << c.output;
}

TEST(OpsRegistry, AnElementwiseOperatorWithoutAFusedExpressionIsRefused) {
  Compiled c = compile_check(real_registry() + "ACROBAT_OP(Fake, \"fake\", 1, \"\", Elementwise, (), (g))\n");
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.output.find("ops.def: operator 'fake': an elementwise operator needs its fused SIMD "
                          "expression"),
            std::string::npos)
      << c.output;
}

TEST(OpsRegistry, AFusedExpressionOnAnotherClassIsRefused) {
  Compiled c = compile_check(real_registry() + "ACROBAT_OP(Fake, \"fake\", 1, \"\", RowWise, (a + a), ())\n");
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.output.find("operator 'fake'"), std::string::npos) << c.output;
}

TEST(OpsRegistry, AnElementwiseOperatorWithoutOneAdjointPerOperandIsRefused) {
  for (const char* adjoint : {"()", "(g)", "(g, g, g)"}) {
    Compiled c = compile_check(real_registry() + "ACROBAT_OP(Fake, \"fake\", 2, \"\", Elementwise, (a + b), " +
                               adjoint + ")\n");
    EXPECT_NE(c.status, 0) << adjoint;
    EXPECT_NE(c.output.find("ops.def: operator 'fake': an elementwise operator needs one adjoint SIMD expression "
                            "per operand"),
              std::string::npos)
        << c.output;
  }
  // Commas inside parentheses belong to one operand's expression.
  Compiled c = compile_check(real_registry() + "ACROBAT_OP(Fake, \"fake\", 1, \"\", Elementwise, (a), "
                             "(simd::max(g, a)))\n");
  EXPECT_EQ(c.status, 0) << c.output;
}

TEST(OpsRegistry, AnAdjointOnAnotherClassIsRefused) {
  Compiled c = compile_check(real_registry() + "ACROBAT_OP(Fake, \"fake\", 1, \"\", RowWise, (), (g))\n");
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.output.find("adjoint SIMD"), std::string::npos) << c.output;
}

}  // namespace
