// Parses model source into the syntax tree. Syntax errors are collected per top-level declaration
// (the parser resynchronises at the next `def`/`type`/`param`/`dim`) so one run reports several.
#pragma once

#include <string>

#include "lang/ast.h"

namespace acrobat {

// Parses `text` (named `file` in positions) and appends its declarations to `module`. Errors go to
// `sink`; the caller decides when to throw them.
void parse_into(ast::Module& module, const std::string& file, const std::string& text,
                DiagnosticSink& sink);

}  // namespace acrobat
