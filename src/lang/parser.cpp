#include "lang/parser.h"

#include <charconv>
#include <cstdlib>
#include <optional>

#include "lang/lexer.h"

namespace acrobat {

using namespace ast;

namespace {

// Thrown inside the parser to abandon the current declaration after a syntax error.
struct SyntaxError {};

// Nesting bound: the parser, the checker and lowering recurse per nested expression, so a hostile
// file of 100000 '(' must become an error, not a stack overflow. What is not nesting costs no level:
// a sequence of lets, an else-if chain and a chain of binary operators (`a + b + c`, also in sizes)
// are parsed by loops, and every walker of the tree goes along them by a loop too (ast.h).
constexpr int kMaxNesting = 256;

class Parser {
 public:
  Parser(Module& module, std::vector<Token> tokens, DiagnosticSink& sink)
      : module_(module), toks_(std::move(tokens)), sink_(sink) {}

  void run() {
    while (cur().kind != Tok::End) {
      try {
        declaration();
      } catch (const SyntaxError&) {
        synchronize();
      }
    }
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  bool at(Tok k) const { return cur().kind == k; }
  Token take() {
    Token t = cur();
    if (t.kind != Tok::End) ++pos_;
    last_ = t;
    return t;
  }
  bool accept(Tok k) {
    if (!at(k)) return false;
    take();
    return true;
  }
  [[noreturn]] void fail(const std::string& expected) {
    // An Error token was reported by the lexer; what the parser would say about it is a cascade.
    if (cur().kind != Tok::Error)
      sink_.error(cur().loc, "expected " + expected + ", found " + describe(cur()));
    throw SyntaxError{};
  }
  Token expect(Tok k, const std::string& context = "") {
    if (!at(k)) fail(std::string(tok_name(k)) + context);
    return take();
  }
  std::string ident(const std::string& what) {
    if (!at(Tok::Ident)) fail(what);
    return take().text;
  }
  Span span_from(const SourceLoc& begin) const {
    return Span{begin, last_.end_line, last_.end_col};
  }
  void synchronize() {
    // Skip to the next token that starts a top-level declaration at the beginning of a line.
    if (cur().kind != Tok::End) take();
    while (!at(Tok::End)) {
      Tok k = cur().kind;
      if ((k == Tok::KwDef || k == Tok::KwType || k == Tok::KwParam || k == Tok::KwDim) &&
          cur().loc.col == 1)
        return;
      take();
    }
  }
  [[noreturn]] void too_deep() {
    sink_.error(cur().loc,
                "expression nested deeper than " + std::to_string(kMaxNesting) +
                    " levels (parentheses, blocks, arguments, unary operators and chains of calls, "
                    "indexes or .N count as levels; sequences of lets, else-if chains and chains of "
                    "binary operators do not); bind inner parts to names with let");
    throw SyntaxError{};
  }
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.too_deep();
      p.peak_ = std::max(p.peak_, p.depth_);
    }
    ~Nest() { --p.depth_; }
  };
  // A postfix chain (`f(x)(y)`, `t.0.1`) is built by a loop, not by recursion, yet each link puts
  // everything parsed before it one level deeper in the tree, which the checker and lowering walk
  // recursively (unlike chains of binary operators, which they walk by loops). peak_ is the deepest level the tree parsed since the innermost
  // open chain began reaches; a chain of n links lies n levels above its deepest operand.
  struct Chain {
    Parser& p;
    int saved_peak;
    int links = 0;
    explicit Chain(Parser& parser) : p(parser), saved_peak(parser.peak_) { p.peak_ = p.depth_; }
    // Called once a link (its operator and right operand) is parsed.
    void link() {
      if (p.peak_ + ++links > kMaxNesting) p.too_deep();
    }
    ~Chain() { p.peak_ = std::max(saved_peak, p.peak_ + links); }
  };

  // ---- declarations ----
  void declaration() {
    switch (cur().kind) {
      case Tok::KwDim: return dim_decl();
      case Tok::KwParam: return param_decl();
      case Tok::KwType: return type_decl();
      case Tok::KwDef: return func_decl();
      default: fail("a declaration ('dim', 'param', 'type' or 'def')");
    }
  }

  void dim_decl() {
    SourceLoc begin = take().loc;
    auto d = std::make_unique<DimDecl>();
    d->name = ident("a dim name after 'dim'");
    expect(Tok::Assign, " after the dim name");
    d->value = dim_expr();
    d->span = span_from(begin);
    module_.dims.push_back(std::move(d));
  }

  void param_decl() {
    SourceLoc begin = take().loc;
    auto p = std::make_unique<ParamDecl>();
    // `frozen` before the name (a contextual word: a param may still be named frozen).
    if (at(Tok::Ident) && cur().text == "frozen" && peek().kind == Tok::Ident) {
      take();
      p->frozen = true;
    }
    p->name = ident("a parameter name after 'param'");
    if (accept(Tok::LBracket)) {
      p->count = dim_expr();
      expect(Tok::RBracket, " closing the parameter count");
    }
    expect(Tok::Colon, " before the parameter's type");
    p->type_expr = type_expr();
    p->span = span_from(begin);
    module_.params.push_back(std::move(p));
  }

  std::vector<std::string> type_params() {
    std::vector<std::string> names;
    if (accept(Tok::LBracket)) {
      do {
        names.push_back(ident("a type parameter name"));
      } while (accept(Tok::Comma));
      expect(Tok::RBracket, " closing the type parameters");
    }
    return names;
  }

  void type_decl() {
    SourceLoc begin = take().loc;
    auto t = std::make_unique<TypeDecl>();
    t->name = ident("a type name after 'type'");
    t->type_params = type_params();
    expect(Tok::Assign, " after the type name");
    accept(Tok::Pipe);
    do {
      CtorSyntax c;
      SourceLoc cbegin = cur().loc;
      c.name = ident("a constructor name");
      if (accept(Tok::LParen)) {
        if (!at(Tok::RParen)) {
          do {
            c.fields.push_back(type_expr());
          } while (accept(Tok::Comma));
        }
        expect(Tok::RParen, " closing the constructor's fields");
      }
      c.span = span_from(cbegin);
      t->ctors.push_back(std::move(c));
    } while (accept(Tok::Pipe));
    t->span = span_from(begin);
    module_.types.push_back(std::move(t));
  }

  void func_decl() {
    SourceLoc begin = take().loc;
    auto f = std::make_unique<FuncDecl>();
    f->name = ident("a function name after 'def'");
    f->type_params = type_params();
    f->params = func_params(/*types_required=*/true);
    if (!at(Tok::Arrow))
      fail("'->' and the result type (every top-level function declares its result type)");
    take();
    f->ret_expr = type_expr();
    f->body = block();
    f->span = span_from(begin);
    module_.funcs.push_back(std::move(f));
  }

  std::vector<FuncParam> func_params(bool types_required) {
    std::vector<FuncParam> params;
    expect(Tok::LParen, " starting the parameter list");
    if (!at(Tok::RParen)) {
      do {
        FuncParam p;
        SourceLoc pbegin = cur().loc;
        p.name = ident("a parameter name");
        if (types_required || at(Tok::Colon)) {
          expect(Tok::Colon, " and the type of parameter '" + p.name + "'");
          p.type_expr = type_expr();
        }
        p.span = span_from(pbegin);
        params.push_back(std::move(p));
      } while (accept(Tok::Comma));
    }
    expect(Tok::RParen, " closing the parameter list");
    return params;
  }

  // ---- types and dims ----
  TypeExprPtr type_expr() {
    Nest nest(*this);
    auto t = std::make_unique<TypeExpr>();
    SourceLoc begin = cur().loc;
    if (at(Tok::Ident) && (cur().text == "int" || cur().text == "float" || cur().text == "bool")) {
      std::string n = take().text;
      t->kind = n == "int" ? TypeExpr::Int : n == "float" ? TypeExpr::Float : TypeExpr::Bool;
    } else if (at(Tok::Ident) && cur().text == "f32") {
      take();
      t->kind = TypeExpr::Tensor;
      expect(Tok::LBracket, " and the tensor's shape after 'f32'");
      if (!at(Tok::RBracket)) {
        do {
          t->dims.push_back(dim_expr());
        } while (accept(Tok::Comma));
      }
      expect(Tok::RBracket, " closing the tensor shape");
    } else if (at(Tok::Ident)) {
      t->kind = TypeExpr::Named;
      t->name = take().text;
      if (accept(Tok::LBracket)) {
        do {
          t->args.push_back(type_expr());
        } while (accept(Tok::Comma));
        expect(Tok::RBracket, " closing the type arguments");
      }
    } else if (accept(Tok::LParen)) {
      t->kind = TypeExpr::Tuple;
      bool trailing_comma = false;
      while (!at(Tok::RParen)) {
        t->args.push_back(type_expr());
        trailing_comma = accept(Tok::Comma);
        if (!trailing_comma) break;
      }
      expect(Tok::RParen, " closing the tuple type");
      if (t->args.size() == 1 && !trailing_comma) {
        auto inner = std::move(t->args[0]);
        return inner;  // parenthesised type
      }
    } else if (accept(Tok::KwFn)) {
      t->kind = TypeExpr::Func;
      expect(Tok::LParen, " after 'fn' in a function type");
      if (!at(Tok::RParen)) {
        do {
          t->args.push_back(type_expr());
        } while (accept(Tok::Comma));
      }
      expect(Tok::RParen, " closing the function type's parameters");
      expect(Tok::Arrow, " and the result type of the function type");
      t->ret = type_expr();
    } else {
      fail("a type (int, float, bool, f32[...], a tuple, a data type or fn(...) -> ...)");
    }
    t->span = span_from(begin);
    return t;
  }

  DimExprPtr dim_expr() { return dim_binary(0); }

  static int dim_prec(Tok k) {
    return k == Tok::Plus || k == Tok::Minus ? 1 : k == Tok::Star || k == Tok::Slash ? 2 : 0;
  }

  DimExprPtr dim_binary(int min_prec) {
    Nest nest(*this);
    auto lhs = dim_primary();
    while (dim_prec(cur().kind) > min_prec) {
      Token op = take();
      auto node = std::make_unique<DimExpr>();
      node->kind = DimExpr::Binary;
      node->op = op.text[0];
      node->span = lhs->span;
      node->lhs = std::move(lhs);
      node->rhs = dim_binary(dim_prec(op.kind));
      node->span.end_line = last_.end_line;
      node->span.end_col = last_.end_col;
      lhs = std::move(node);
    }
    return lhs;
  }

  DimExprPtr dim_primary() {
    auto d = std::make_unique<DimExpr>();
    SourceLoc begin = cur().loc;
    if (at(Tok::Int)) {
      d->kind = DimExpr::Lit;
      d->value = int_value(take());
    } else if (at(Tok::Ident)) {
      d->kind = DimExpr::Name;
      d->name = take().text;
    } else if (accept(Tok::LParen)) {
      d = dim_expr();
      expect(Tok::RParen, " closing the parenthesised size");
      return d;
    } else {
      fail("a size (an integer or a dim name)");
    }
    d->span = span_from(begin);
    return d;
  }

  int64_t int_value(const Token& t) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || ptr != t.text.data() + t.text.size()) {
      sink_.error(t.loc, "integer literal " + t.text + " does not fit in 64 bits");
      return 0;
    }
    return v;
  }

  // ---- expressions ----
  ExprPtr block() {
    expect(Tok::LBrace, " starting a block");
    auto e = expr();
    expect(Tok::RBrace, " closing the block");
    return e;
  }

  ExprPtr expr() {
    Nest nest(*this);
    switch (cur().kind) {
      case Tok::KwLet: return let_expr();
      case Tok::KwIf: return if_expr();
      case Tok::KwMatch: return match_expr();
      case Tok::KwFn: return lambda();
      default: return binary(0);
    }
  }

  // A sequence of lets, read by a loop: `let a = x; let b = y; body` nests as Let(a, Let(b, body)),
  // built from the inside out once the body is read. Each let's span runs to the body's end.
  ExprPtr let_expr() {
    std::vector<std::pair<SourceLoc, std::unique_ptr<Let>>> lets;
    while (at(Tok::KwLet)) {
      SourceLoc begin = take().loc;
      auto let = std::make_unique<Let>();
      let->pattern = pattern();
      if (accept(Tok::Colon)) let->annotation = type_expr();
      expect(Tok::Assign, " after the let pattern");
      let->value = expr();
      expect(Tok::Semi, " ending the let binding");
      lets.emplace_back(begin, std::move(let));
    }
    return nest_inside_out(lets, &Let::body, expr());
  }

  // Builds a chain read by a loop from the inside out: each node gets the one after it (the
  // innermost gets `inner`) in its `slot`, and a span from its start to the last token read.
  template <class N>
  ExprPtr nest_inside_out(std::vector<std::pair<SourceLoc, std::unique_ptr<N>>>& nodes,
                          ExprPtr N::*slot, ExprPtr inner) {
    for (size_t i = nodes.size(); i-- > 0;) {
      auto& [begin, node] = nodes[i];
      (*node).*slot = std::move(inner);
      node->span = span_from(begin);
      inner = std::move(node);
    }
    return inner;
  }

  // An else-if chain, read by a loop and built from the inside out like a sequence of lets.
  ExprPtr if_expr() {
    std::vector<std::pair<SourceLoc, std::unique_ptr<If>>> arms;
    ExprPtr rest;  // the last arm's else branch
    while (!rest) {
      SourceLoc begin = take().loc;
      auto e = std::make_unique<If>();
      e->cond = binary(0);
      e->then_branch = block();
      if (!at(Tok::KwElse)) fail("'else' (every 'if' is an expression and needs both branches)");
      take();
      arms.emplace_back(begin, std::move(e));
      if (!at(Tok::KwIf)) rest = block();
    }
    return nest_inside_out(arms, &If::else_branch, std::move(rest));
  }

  ExprPtr match_expr() {
    SourceLoc begin = take().loc;
    auto m = std::make_unique<Match>();
    m->scrutinee = binary(0);
    expect(Tok::LBrace, " starting the match clauses");
    while (!at(Tok::RBrace)) {
      Clause c;
      accept(Tok::Pipe);
      c.pattern = pattern();
      expect(Tok::FatArrow, " after the clause's pattern");
      c.body = at(Tok::LBrace) ? block() : expr();
      m->clauses.push_back(std::move(c));
      if (!accept(Tok::Comma) && !at(Tok::RBrace)) fail("',' or '}' after a match clause");
    }
    if (m->clauses.empty()) fail("at least one match clause");
    take();
    m->span = span_from(begin);
    return m;
  }

  ExprPtr lambda() {
    SourceLoc begin = take().loc;
    auto l = std::make_unique<Lambda>();
    l->params = func_params(/*types_required=*/false);
    if (accept(Tok::Arrow)) l->ret_expr = type_expr();
    l->body = block();
    l->span = span_from(begin);
    return l;
  }

  PatternPtr pattern() {
    Nest nest(*this);
    auto p = std::make_unique<Pattern>();
    SourceLoc begin = cur().loc;
    if (accept(Tok::Underscore)) {
      p->kind = Pattern::Wildcard;
    } else if (at(Tok::Ident)) {
      p->name = take().text;
      // Constructors start with an upper-case letter; variables do not.
      bool upper = std::isupper(static_cast<unsigned char>(p->name[0]));
      p->kind = upper ? Pattern::Ctor : Pattern::Bind;
      if (upper && accept(Tok::LParen)) {
        p->has_parens = true;
        if (!at(Tok::RParen)) {
          do {
            p->subs.push_back(pattern());
          } while (accept(Tok::Comma));
        }
        expect(Tok::RParen, " closing the constructor pattern");
      }
    } else if (accept(Tok::LParen)) {
      p->kind = Pattern::Tuple;
      while (!at(Tok::RParen)) {
        p->subs.push_back(pattern());
        if (!accept(Tok::Comma)) break;
      }
      expect(Tok::RParen, " closing the tuple pattern");
      if (p->subs.size() == 1) return std::move(p->subs[0]);
    } else {
      fail("a pattern (a name, '_', a constructor or a tuple)");
    }
    p->span = span_from(begin);
    return p;
  }

  static int prec(Tok k) {
    switch (k) {
      case Tok::OrOr: return 1;
      case Tok::AndAnd: return 2;
      case Tok::Lt: case Tok::Le: case Tok::Gt: case Tok::Ge: case Tok::EqEq: case Tok::NotEq:
        return 3;
      case Tok::Plus: case Tok::Minus: return 4;
      case Tok::Star: case Tok::Slash: case Tok::Percent: case Tok::At: return 5;
      default: return 0;
    }
  }

  static BinOp binop(Tok k) {
    switch (k) {
      case Tok::OrOr: return BinOp::Or;
      case Tok::AndAnd: return BinOp::And;
      case Tok::Lt: return BinOp::Lt;
      case Tok::Le: return BinOp::Le;
      case Tok::Gt: return BinOp::Gt;
      case Tok::Ge: return BinOp::Ge;
      case Tok::EqEq: return BinOp::Eq;
      case Tok::NotEq: return BinOp::Ne;
      case Tok::Plus: return BinOp::Add;
      case Tok::Minus: return BinOp::Sub;
      case Tok::Star: return BinOp::Mul;
      case Tok::Slash: return BinOp::Div;
      case Tok::Percent: return BinOp::Mod;
      default: return BinOp::MatMul;
    }
  }

  ExprPtr binary(int min_prec) {
    // Called by expr() (one level already) for a whole expression, and by itself, one level deeper,
    // for an operand of higher precedence.
    std::optional<Nest> nest;
    if (min_prec > 0) nest.emplace(*this);
    auto lhs = unary();
    while (prec(cur().kind) > min_prec) {
      Token op = take();
      int p = prec(op.kind);
      auto node = std::make_unique<Binary>();
      node->op = binop(op.kind);
      node->span = lhs->span;
      node->lhs = std::move(lhs);
      node->rhs = binary(p);
      if (p == 3 && prec(cur().kind) == 3)
        sink_.error(cur().loc, "comparisons do not chain; combine them with '&&'");
      node->span.end_line = last_.end_line;
      node->span.end_col = last_.end_col;
      lhs = std::move(node);
    }
    return lhs;
  }

  ExprPtr unary() {
    if (at(Tok::Minus) || at(Tok::Bang)) {
      Nest nest(*this);
      SourceLoc begin = cur().loc;
      Token op = take();
      // A negative literal is a literal, so that `-1` folds and `x * -0.5` needs no parentheses.
      if (op.kind == Tok::Minus && (at(Tok::Int) || at(Tok::Float)) && !is_postfix(peek().kind)) {
        auto lit = literal();
        if (lit->kind == ExprKind::IntLit) lit->as<IntLit>().value = -lit->as<IntLit>().value;
        else lit->as<FloatLit>().value = -lit->as<FloatLit>().value;
        lit->span.begin = begin;
        return lit;
      }
      auto u = std::make_unique<Unary>();
      u->op = op.kind == Tok::Minus ? '-' : '!';
      u->operand = unary();
      u->span = span_from(begin);
      return u;
    }
    return postfix();
  }

  static bool is_postfix(Tok k) { return k == Tok::LParen || k == Tok::LBracket || k == Tok::Dot; }

  ExprPtr postfix() {
    Chain chain(*this);
    auto e = primary();
    for (;;) {
      SourceLoc begin = e->span.begin;
      if (accept(Tok::LParen)) {
        auto call = std::make_unique<Call>();
        call->callee = std::move(e);
        if (!at(Tok::RParen)) {
          do {
            if (at(Tok::Ident) && peek().kind == Tok::Assign) {
              NamedArg arg;
              SourceLoc abegin = cur().loc;
              arg.name = take().text;
              take();
              arg.value = expr();
              arg.span = span_from(abegin);
              call->named.push_back(std::move(arg));
            } else {
              if (!call->named.empty())
                sink_.error(cur().loc, "positional argument after a named argument");
              call->args.push_back(expr());
            }
          } while (accept(Tok::Comma));
        }
        expect(Tok::RParen, " closing the argument list");
        call->span = span_from(begin);
        e = std::move(call);
        chain.link();
      } else if (accept(Tok::LBracket)) {
        auto idx = std::make_unique<Index>();
        idx->base = std::move(e);
        idx->index = expr();
        expect(Tok::RBracket, " closing the index");
        idx->span = span_from(begin);
        e = std::move(idx);
        chain.link();
      } else if (accept(Tok::Dot)) {
        auto proj = std::make_unique<Proj>();
        proj->base = std::move(e);
        Token n = expect(Tok::Int, " (a tuple field number) after '.'");
        proj->index = static_cast<int>(int_value(n));
        proj->span = span_from(begin);
        e = std::move(proj);
        chain.link();
      } else {
        return e;
      }
    }
  }

  ExprPtr literal() {
    Token t = take();
    if (t.kind == Tok::Int) {
      auto lit = std::make_unique<IntLit>();
      lit->value = int_value(t);
      lit->span = span_from(t.loc);
      return lit;
    }
    auto lit = std::make_unique<FloatLit>();
    lit->value = std::strtod(t.text.c_str(), nullptr);
    lit->span = span_from(t.loc);
    return lit;
  }

  ExprPtr primary() {
    SourceLoc begin = cur().loc;
    switch (cur().kind) {
      case Tok::Int:
      case Tok::Float: return literal();
      case Tok::KwTrue:
      case Tok::KwFalse: {
        auto lit = std::make_unique<BoolLit>();
        lit->value = take().kind == Tok::KwTrue;
        lit->span = span_from(begin);
        return lit;
      }
      case Tok::Ident: {
        auto n = std::make_unique<Name>();
        n->name = take().text;
        n->span = span_from(begin);
        return n;
      }
      case Tok::LParen: {
        take();
        std::vector<ExprPtr> elems;
        bool trailing_comma = false;
        while (!at(Tok::RParen)) {
          elems.push_back(expr());
          trailing_comma = accept(Tok::Comma);
          if (!trailing_comma) break;
        }
        expect(Tok::RParen, " closing the parenthesis");
        if (elems.size() == 1 && !trailing_comma) return std::move(elems[0]);
        auto t = std::make_unique<Tuple>();
        t->elems = std::move(elems);
        t->span = span_from(begin);
        return t;
      }
      case Tok::LBrace: return block();
      case Tok::KwLet:
      case Tok::KwIf:
      case Tok::KwMatch:
      case Tok::KwFn: return expr();
      default: fail("an expression");
    }
  }

  Module& module_;
  std::vector<Token> toks_;
  DiagnosticSink& sink_;
  size_t pos_ = 0;
  Token last_{Tok::End, "", {}, 0, 0};
  int depth_ = 0;
  int peak_ = 0;
};

}  // namespace

void parse_into(Module& module, const std::string& file, const std::string& text,
                DiagnosticSink& sink) {
  auto tokens = lex(file, text, sink);
  module.files.push_back(file);
  Parser(module, std::move(tokens), sink).run();
}

}  // namespace acrobat
