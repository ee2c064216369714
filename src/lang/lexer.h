// Splits model source text into tokens with positions. Comments run from `//` to the end of the line.
#pragma once

#include <string>
#include <vector>

#include "support/diagnostics.h"

namespace acrobat {

enum class Tok {
  End, Ident, Int, Float,
  Error,  // a character or number the lexer already reported; the parser reports nothing more for it
  // keywords
  KwDim, KwParam, KwType, KwDef, KwLet, KwIf, KwElse, KwMatch, KwFn, KwTrue, KwFalse,
  // punctuation and operators
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Colon, Semi, Dot, Assign, FatArrow,
  Arrow, Pipe, Plus, Minus, Star, Slash, Percent, At, Lt, Le, Gt, Ge, EqEq, NotEq, AndAnd, OrOr,
  Bang, Underscore,
};

// How a token kind is shown in "expected X, found Y" messages, e.g. "')'" or "identifier".
const char* tok_name(Tok kind);

struct Token {
  Tok kind;
  std::string text;  // the exact source text
  SourceLoc loc;
  uint32_t end_line, end_col;
};

// Lexes `text` (named `file` in positions). Unknown characters and malformed numbers are reported to
// `sink` and become Error tokens, so that later errors are still found but not errors they cause.
std::vector<Token> lex(const std::string& file, const std::string& text, DiagnosticSink& sink);

// "'+'", "identifier 'foo'", "integer 12", "end of file": how a found token is described.
std::string describe(const Token& token);

}  // namespace acrobat
