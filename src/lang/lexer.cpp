#include "lang/lexer.h"

#include <cctype>
#include <unordered_map>

namespace acrobat {

const char* tok_name(Tok kind) {
  switch (kind) {
    case Tok::End: return "end of file";
    case Tok::Ident: return "identifier";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    case Tok::Error: return "invalid token";
    case Tok::KwDim: return "'dim'";
    case Tok::KwParam: return "'param'";
    case Tok::KwType: return "'type'";
    case Tok::KwDef: return "'def'";
    case Tok::KwLet: return "'let'";
    case Tok::KwIf: return "'if'";
    case Tok::KwElse: return "'else'";
    case Tok::KwMatch: return "'match'";
    case Tok::KwFn: return "'fn'";
    case Tok::KwTrue: return "'true'";
    case Tok::KwFalse: return "'false'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Semi: return "';'";
    case Tok::Dot: return "'.'";
    case Tok::Assign: return "'='";
    case Tok::FatArrow: return "'=>'";
    case Tok::Arrow: return "'->'";
    case Tok::Pipe: return "'|'";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Percent: return "'%'";
    case Tok::At: return "'@'";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::EqEq: return "'=='";
    case Tok::NotEq: return "'!='";
    case Tok::AndAnd: return "'&&'";
    case Tok::OrOr: return "'||'";
    case Tok::Bang: return "'!'";
    case Tok::Underscore: return "'_'";
  }
  return "token";
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case Tok::End: return "end of file";
    case Tok::Ident: return "identifier '" + token.text + "'";
    case Tok::Int: return "integer " + token.text;
    case Tok::Float: return "float " + token.text;
    default: return tok_name(token.kind);
  }
}

namespace {

const std::unordered_map<std::string, Tok>& keywords() {
  static const std::unordered_map<std::string, Tok> table = {
      {"dim", Tok::KwDim},     {"param", Tok::KwParam}, {"type", Tok::KwType},
      {"def", Tok::KwDef},     {"let", Tok::KwLet},     {"if", Tok::KwIf},
      {"else", Tok::KwElse},   {"match", Tok::KwMatch}, {"fn", Tok::KwFn},
      {"true", Tok::KwTrue},   {"false", Tok::KwFalse}, {"_", Tok::Underscore},
  };
  return table;
}

class Lexer {
 public:
  Lexer(const std::string& file, const std::string& text, DiagnosticSink& sink)
      : file_(file), text_(text), sink_(sink) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space_and_comments();
      SourceLoc start = here();
      if (pos_ >= text_.size()) {
        out.push_back(Token{Tok::End, "", start, line_, col_});
        return out;
      }
      size_t begin = pos_;
      Tok kind;
      if (!next_token(kind)) kind = Tok::Error;  // reported already
      out.push_back(Token{kind, text_.substr(begin, pos_ - begin), start, line_, col_});
    }
  }

 private:
  SourceLoc here() const { return SourceLoc{file_, line_, col_}; }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance();
      } else if (c == '/' && peek(1) == '/') {
        while (pos_ < text_.size() && peek() != '\n') advance();
      } else {
        return;
      }
    }
  }

  // Lexes one token starting at pos_; returns false (after reporting) for a character to skip.
  bool next_token(Tok& kind) {
    char c = peek();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t begin = pos_;
      while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') advance();
      auto it = keywords().find(text_.substr(begin, pos_ - begin));
      kind = it == keywords().end() ? Tok::Ident : it->second;
      return true;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(kind);
    SourceLoc start = here();
    advance();
    auto two = [&](char second, Tok both, Tok one) {
      if (peek() == second) {
        advance();
        return both;
      }
      return one;
    };
    switch (c) {
      case '(': kind = Tok::LParen; return true;
      case ')': kind = Tok::RParen; return true;
      case '[': kind = Tok::LBracket; return true;
      case ']': kind = Tok::RBracket; return true;
      case '{': kind = Tok::LBrace; return true;
      case '}': kind = Tok::RBrace; return true;
      case ',': kind = Tok::Comma; return true;
      case ':': kind = Tok::Colon; return true;
      case ';': kind = Tok::Semi; return true;
      case '.': kind = Tok::Dot; return true;
      case '+': kind = Tok::Plus; return true;
      case '*': kind = Tok::Star; return true;
      case '/': kind = Tok::Slash; return true;
      case '%': kind = Tok::Percent; return true;
      case '@': kind = Tok::At; return true;
      case '|': kind = two('|', Tok::OrOr, Tok::Pipe); return true;
      case '-': kind = two('>', Tok::Arrow, Tok::Minus); return true;
      case '<': kind = two('=', Tok::Le, Tok::Lt); return true;
      case '>': kind = two('=', Tok::Ge, Tok::Gt); return true;
      case '!': kind = two('=', Tok::NotEq, Tok::Bang); return true;
      case '=':
        if (peek() == '>') {
          advance();
          kind = Tok::FatArrow;
          return true;
        }
        kind = two('=', Tok::EqEq, Tok::Assign);
        return true;
      case '&':
        if (peek() == '&') {
          advance();
          kind = Tok::AndAnd;
          return true;
        }
        sink_.error(start, "expected '&&', found a single '&'");
        return false;
      default: {
        std::string shown = std::isprint(static_cast<unsigned char>(c))
                                ? std::string("'") + c + "'"
                                : "byte 0x" + hex(static_cast<unsigned char>(c));
        sink_.error(start, "unexpected character " + shown + " in model source");
        return false;
      }
    }
  }

  static std::string hex(unsigned v) {
    const char* digits = "0123456789abcdef";
    return std::string{digits[v >> 4], digits[v & 15]};
  }

  bool number(Tok& kind) {
    SourceLoc start = here();
    size_t begin = pos_;
    // After a '.', a number is a tuple field: `t.0.1` is t.0 then .1, not t. then 0.1.
    bool field = begin > 0 && text_[begin - 1] == '.';
    while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
    kind = Tok::Int;
    if (!field && peek() == '.' && std::isdigit(static_cast<unsigned char>(peek(1)))) {
      kind = Tok::Float;
      advance();
      while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t save_pos = pos_;
      uint32_t save_col = col_;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (std::isdigit(static_cast<unsigned char>(peek()))) {
        kind = Tok::Float;
        while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
      } else {
        pos_ = save_pos;
        col_ = save_col;
      }
    }
    if (std::isalpha(static_cast<unsigned char>(peek())) || peek() == '_') {
      while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') advance();
      sink_.error(start, "malformed number '" + text_.substr(begin, pos_ - begin) +
                             "': expected digits, found a letter");
      return false;
    }
    return true;
  }

  const std::string& file_;
  const std::string& text_;
  DiagnosticSink& sink_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

}  // namespace

std::vector<Token> lex(const std::string& file, const std::string& text, DiagnosticSink& sink) {
  return Lexer(file, text, sink).run();
}

}  // namespace acrobat
