//===- JinjaParse.cpp - reading a chat template ---------------------------===//
//
// The template's pieces and tokens (JinjaLex.h) are parsed: each tag's
// tokens by Jinja's precedence: ternary, or, and, not, comparisons (in, is),
// + -, ~, * / // %, **, unary, and postfix (.attr, [item], [slice], (call),
// |filter).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/Jinja.h"
#include "runtime/data/template/JinjaLex.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;
using namespace twill::jinja;

namespace {

/// Parses one tag's tokens.
class Parser {
public:
  Parser(std::vector<Token> tokens, llvm::StringRef name)
      : tokens(std::move(tokens)), name(name) {}

  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}:{1}: ", name, peek().line).str() + what);
  }
  const Token &peek(size_t ahead = 0) const {
    return tokens[std::min(at + ahead, tokens.size() - 1)];
  }
  bool isOp(llvm::StringRef op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Op && peek(ahead).text == op;
  }
  bool isName(llvm::StringRef word, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Name && peek(ahead).text == word;
  }
  bool atEnd() const { return peek().kind == Token::End; }
  Token next() { return tokens[std::min(at++, tokens.size() - 1)]; }
  llvm::Error expectOp(llvm::StringRef op) {
    if (!isOp(op))
      return fail("expected '" + op + "', found '" + peek().text + "'");
    ++at;
    return llvm::Error::success();
  }
  llvm::Expected<std::string> expectName() {
    if (peek().kind != Token::Name)
      return fail("expected a name, found '" + peek().text + "'");
    return next().text;
  }

  /// `f | g(args)` of a filter block, applied to `value`.
  llvm::Expected<ExprPtr> filterChain(ExprPtr value) {
    do {
      llvm::Expected<std::string> word = expectName();
      if (!word)
        return word.takeError();
      if (!hasFilter(*word))
        return fail("unsupported filter '" + *word + "'");
      value = make(Expr::Filter, {value}, *word);
      if (isOp("(")) {
        ++at;
        if (llvm::Error error = arguments(*value))
          return std::move(error);
      }
    } while (isOp("|") && (++at, true));
    return value;
  }

  llvm::Expected<ExprPtr> expression() {
    // Nesting is bounded, so that no template overflows the stack.
    if (++depth > kMaxDepth)
      return fail("nested deeper than " + llvm::Twine(kMaxDepth) + " levels");
    llvm::Expected<ExprPtr> parsed = ternary();
    --depth;
    return parsed;
  }
  static constexpr int kMaxDepth = 128;

private:
  ExprPtr make(Expr::Kind kind, std::vector<ExprPtr> args,
               std::string text = "") {
    auto expr = std::make_shared<Expr>();
    expr->kind = kind;
    expr->line = peek().line;
    expr->args = std::move(args);
    expr->name = std::move(text);
    return expr;
  }

  llvm::Expected<ExprPtr> ternary() {
    llvm::Expected<ExprPtr> value = logicalOr();
    if (!value || !isName("if"))
      return value;
    ++at;
    llvm::Expected<ExprPtr> condition = logicalOr();
    if (!condition)
      return condition.takeError();
    ExprPtr otherwise;
    if (isName("else")) {
      ++at;
      llvm::Expected<ExprPtr> parsed = ternary();
      if (!parsed)
        return parsed.takeError();
      otherwise = *parsed;
    }
    return make(Expr::Ternary, {*value, *condition, otherwise});
  }

  template <typename Next>
  llvm::Expected<ExprPtr> binary(llvm::ArrayRef<llvm::StringRef> ops,
                                 bool words, Next next) {
    llvm::Expected<ExprPtr> left = next();
    if (!left)
      return left;
    ExprPtr result = *left;
    while (true) {
      std::string op;
      for (llvm::StringRef candidate : ops)
        if (words ? isName(candidate) : isOp(candidate))
          op = candidate.str();
      if (op.empty())
        return result;
      ++at;
      llvm::Expected<ExprPtr> right = next();
      if (!right)
        return right;
      result = make(Expr::Binary, {result, *right}, op);
    }
  }
  llvm::Expected<ExprPtr> logicalOr() {
    return binary({"or"}, true, [&] { return logicalAnd(); });
  }
  llvm::Expected<ExprPtr> logicalAnd() {
    return binary({"and"}, true, [&] { return logicalNot(); });
  }
  llvm::Expected<ExprPtr> logicalNot() {
    if (!isName("not"))
      return comparison();
    ++at;
    llvm::Expected<ExprPtr> operand = expression();
    if (!operand)
      return operand;
    return make(Expr::Unary, {*operand}, "not");
  }
  llvm::Expected<ExprPtr> comparison() {
    llvm::Expected<ExprPtr> left = sum();
    if (!left)
      return left;
    ExprPtr result = *left;
    while (true) {
      std::string op;
      for (llvm::StringRef candidate : {"==", "!=", "<", ">", "<=", ">="})
        if (isOp(candidate))
          op = candidate.str();
      if (isName("in"))
        op = "in";
      else if (isName("not") && isName("in", 1))
        op = "not in";
      if (op.empty())
        return result;
      at += op == "not in" ? 2 : 1;
      llvm::Expected<ExprPtr> right = sum();
      if (!right)
        return right;
      result = make(Expr::Binary, {result, *right}, op);
    }
  }
  llvm::Expected<ExprPtr> sum() {
    return binary({"+", "-"}, false, [&] { return concat(); });
  }
  llvm::Expected<ExprPtr> concat() {
    return binary({"~"}, false, [&] { return product(); });
  }
  llvm::Expected<ExprPtr> product() {
    return binary({"*", "/", "//", "%"}, false, [&] { return power(); });
  }
  llvm::Expected<ExprPtr> power() {
    return binary({"**"}, false, [&] { return unary(); });
  }
  llvm::Expected<ExprPtr> unary() {
    if (isOp("-") || isOp("+")) {
      std::string op = next().text;
      if (++depth > kMaxDepth)
        return fail("nested deeper than " + llvm::Twine(kMaxDepth) + " levels");
      llvm::Expected<ExprPtr> operand = unary();
      --depth;
      if (!operand)
        return operand;
      return make(Expr::Unary, {*operand}, op);
    }
    llvm::Expected<ExprPtr> value = postfix();
    if (!value)
      return value;
    return filtersAndTests(*value);
  }

  /// `(args, keyword=value)` after the `(`.
  llvm::Error arguments(Expr &call) {
    while (!isOp(")")) {
      if (peek().kind == Token::Name && isOp("=", 1)) {
        std::string keyword = next().text;
        ++at;
        llvm::Expected<ExprPtr> value = expression();
        if (!value)
          return value.takeError();
        call.keywords.push_back({keyword, *value});
      } else {
        llvm::Expected<ExprPtr> value = expression();
        if (!value)
          return value.takeError();
        call.args.push_back(*value);
      }
      if (!isOp(","))
        break;
      ++at;
    }
    return expectOp(")");
  }

  llvm::Expected<ExprPtr> filtersAndTests(ExprPtr value) {
    while (isOp("|") || isName("is")) {
      bool filter = isOp("|");
      ++at;
      bool negated = !filter && isName("not");
      if (negated)
        ++at;
      llvm::Expected<std::string> word = expectName();
      if (!word)
        return word.takeError();
      if (!(filter ? hasFilter(*word) : hasTest(*word)))
        return fail(llvm::formatv("unsupported {0} '{1}'",
                                  filter ? "filter" : "test", *word)
                        .str());
      ExprPtr applied =
          make(filter ? Expr::Filter : Expr::Test, {value}, *word);
      applied->negated = negated;
      if (isOp("(")) {
        ++at;
        if (llvm::Error error = arguments(*applied))
          return std::move(error);
      } else if (!filter && (peek().kind == Token::String ||
                             peek().kind == Token::Number)) {
        // A test's one argument without parentheses: `is sameas none`.
        llvm::Expected<ExprPtr> argument = primary();
        if (!argument)
          return argument;
        applied->args.push_back(*argument);
      }
      value = applied;
    }
    return value;
  }

  llvm::Expected<ExprPtr> postfix() {
    llvm::Expected<ExprPtr> parsed = primary();
    if (!parsed)
      return parsed;
    ExprPtr value = *parsed;
    while (true) {
      if (isOp(".")) {
        ++at;
        llvm::Expected<std::string> attribute = expectName();
        if (!attribute)
          return attribute.takeError();
        value = make(Expr::Attr, {value}, *attribute);
      } else if (isOp("[")) {
        ++at;
        // An item, or a slice [start:stop:step] (each part optional).
        std::vector<ExprPtr> parts{value};
        bool slice = false;
        for (int part = 0; part < 3; ++part) {
          ExprPtr index;
          if (!isOp(":") && !isOp("]")) {
            llvm::Expected<ExprPtr> parsedIndex = expression();
            if (!parsedIndex)
              return parsedIndex;
            index = *parsedIndex;
          }
          parts.push_back(index);
          if (!isOp(":"))
            break;
          slice = true;
          ++at;
        }
        if (llvm::Error error = expectOp("]"))
          return std::move(error);
        if (slice) {
          parts.resize(4);
          value = make(Expr::Slice, parts);
        } else {
          value = make(Expr::Item, {value, parts[1]});
        }
      } else if (isOp("(")) {
        ++at;
        ExprPtr call = make(Expr::Call, {value});
        if (llvm::Error error = arguments(*call))
          return std::move(error);
        value = call;
      } else {
        return value;
      }
    }
  }

  llvm::Expected<ExprPtr> primary() {
    Token token = next();
    switch (token.kind) {
    case Token::String: {
      ExprPtr literal = make(Expr::Literal, {});
      literal->value = Value::of(token.text);
      // Adjacent strings are one ("a" "b").
      while (peek().kind == Token::String)
        literal->value.string += next().text;
      return literal;
    }
    case Token::Number: {
      ExprPtr literal = make(Expr::Literal, {});
      std::string digits = token.text;
      llvm::erase(digits, '_');
      if (llvm::StringRef(digits).find_first_of(".eE") != llvm::StringRef::npos) {
        double value;
        if (llvm::StringRef(digits).getAsDouble(value))
          return fail("bad number '" + token.text + "'");
        literal->value = Value::of(value);
      } else {
        int64_t value;
        if (llvm::StringRef(digits).getAsInteger(10, value))
          return fail("bad number '" + token.text + "'");
        literal->value = Value::of(value);
      }
      return literal;
    }
    case Token::Name: {
      ExprPtr literal = make(Expr::Literal, {});
      if (token.text == "true" || token.text == "True")
        literal->value = Value::of(true);
      else if (token.text == "false" || token.text == "False")
        literal->value = Value::of(false);
      else if (token.text == "none" || token.text == "None")
        literal->value = Value::none();
      else
        return make(Expr::Name, {}, token.text);
      return literal;
    }
    case Token::Op:
      if (token.text == "(") {
        llvm::Expected<ExprPtr> inner = expression();
        if (!inner)
          return inner;
        // A tuple (a, b) is a list here.
        if (isOp(",")) {
          ExprPtr tuple = make(Expr::ListOf, {*inner});
          while (isOp(",")) {
            ++at;
            if (isOp(")"))
              break;
            llvm::Expected<ExprPtr> item = expression();
            if (!item)
              return item;
            tuple->args.push_back(*item);
          }
          if (llvm::Error error = expectOp(")"))
            return std::move(error);
          return tuple;
        }
        if (llvm::Error error = expectOp(")"))
          return std::move(error);
        return inner;
      }
      if (token.text == "[") {
        ExprPtr list = make(Expr::ListOf, {});
        while (!isOp("]")) {
          llvm::Expected<ExprPtr> item = expression();
          if (!item)
            return item;
          list->args.push_back(*item);
          if (!isOp(","))
            break;
          ++at;
        }
        if (llvm::Error error = expectOp("]"))
          return std::move(error);
        return list;
      }
      if (token.text == "{") {
        ExprPtr dict = make(Expr::DictOf, {});
        while (!isOp("}")) {
          if (peek().kind != Token::String)
            return fail("a dict's keys must be strings");
          dict->keys.push_back(next().text);
          if (llvm::Error error = expectOp(":"))
            return std::move(error);
          llvm::Expected<ExprPtr> item = expression();
          if (!item)
            return item;
          dict->args.push_back(*item);
          if (!isOp(","))
            break;
          ++at;
        }
        if (llvm::Error error = expectOp("}"))
          return std::move(error);
        return dict;
      }
      [[fallthrough]];
    case Token::End:
      --at;
      return fail("expected a value, found '" + token.text + "'");
    }
    return fail("expected a value");
  }

  std::vector<Token> tokens;
  size_t at = 0;
  std::string name;
  int depth = 0;
};

/// Builds the tree of statements from the pieces.
class Builder {
public:
  Builder(std::vector<Piece> pieces, llvm::StringRef name)
      : pieces(std::move(pieces)), name(name) {}

  llvm::Expected<NodePtr> build() { return sequence({}); }

private:
  llvm::Error fail(int line, const llvm::Twine &what) const {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}:{1}: ", name, line).str() + what);
  }
  static std::string keyword(const Piece &piece) {
    llvm::StringRef text = llvm::StringRef(piece.text).ltrim();
    return text.take_while([](char c) { return llvm::isAlnum(c) || c == '_'; })
        .str();
  }

  /// Statements until one whose keyword is in `ends` (left unconsumed).
  llvm::Expected<NodePtr> sequence(llvm::ArrayRef<llvm::StringRef> ends) {
    if (++depth > Parser::kMaxDepth)
      return fail(at < pieces.size() ? pieces[at].line : 0,
                  "blocks nested deeper than " +
                      llvm::Twine(Parser::kMaxDepth) + " levels");
    llvm::scope_exit leave([&] { --depth; });
    auto node = std::make_shared<Node>();
    node->kind = Node::Sequence;
    while (at < pieces.size()) {
      const Piece &piece = pieces[at];
      if (piece.kind == Piece::Text) {
        auto text = std::make_shared<Node>();
        text->kind = Node::Text;
        text->text = piece.text;
        node->children.push_back(text);
        ++at;
        continue;
      }
      llvm::Expected<std::vector<Token>> tokens =
          tokenize(piece.text, piece.line, name);
      if (!tokens)
        return tokens.takeError();
      Parser parser(std::move(*tokens), name);
      if (piece.kind == Piece::Output) {
        llvm::Expected<ExprPtr> expr = parser.expression();
        if (!expr)
          return expr.takeError();
        if (!parser.atEnd())
          return parser.fail("unexpected '" + parser.peek().text + "'");
        auto output = std::make_shared<Node>();
        output->kind = Node::Output;
        output->line = piece.line;
        output->expr = *expr;
        node->children.push_back(output);
        ++at;
        continue;
      }
      std::string word = keyword(piece);
      if (llvm::is_contained(ends, word))
        return node;
      if (llvm::is_contained({"elif", "else", "endif", "endfor", "endset",
                              "endmacro", "endwith", "endfilter"},
                             word))
        return fail(piece.line, "'" + word + "' without the block it ends");
      ++at;
      llvm::Expected<NodePtr> statement =
          this->statement(word, parser, piece.line);
      if (!statement)
        return statement;
      node->children.push_back(*statement);
    }
    if (!ends.empty())
      return fail(pieces.empty() ? 1 : pieces.back().line,
                  "the template ends inside a block: expected '" + ends.back() +
                      "'");
    return node;
  }

  /// The keyword of the statement piece `at` points to, consumed.
  std::string take() { return keyword(pieces[at++]); }
  Parser parserOf(const Piece &piece) {
    return Parser(llvm::cantFail(tokenize(piece.text, piece.line, name)), name);
  }

  llvm::Expected<NodePtr> statement(llvm::StringRef word, Parser &parser,
                                    int line) {
    parser.next(); // the keyword
    auto node = std::make_shared<Node>();
    node->line = line;
    if (word == "if") {
      node->kind = Node::If;
      llvm::Expected<ExprPtr> condition = parser.expression();
      while (true) {
        if (!condition)
          return condition.takeError();
        llvm::Expected<NodePtr> body = sequence({"elif", "else", "endif"});
        if (!body)
          return body;
        node->branches.push_back({*condition, *body});
        std::string end = take();
        if (end == "endif")
          return node;
        Parser next = parserOf(pieces[at - 1]);
        next.next();
        if (end == "else") {
          llvm::Expected<NodePtr> otherwise = sequence({"endif"});
          if (!otherwise)
            return otherwise;
          node->branches.push_back({nullptr, *otherwise});
          take();
          return node;
        }
        condition = next.expression();
      }
    }
    if (word == "for") {
      node->kind = Node::For;
      do {
        llvm::Expected<std::string> target = parser.expectName();
        if (!target)
          return target.takeError();
        node->targets.push_back(*target);
      } while (parser.isOp(",") && (parser.next(), true));
      if (!parser.isName("in"))
        return parser.fail("expected 'in'");
      parser.next();
      // The iterable stops before a loop filter's `if` (not a ternary).
      llvm::Expected<ExprPtr> iterable = parser.expression();
      if (!iterable)
        return iterable.takeError();
      node->expr = *iterable;
      if ((*iterable)->kind == Expr::Ternary && !(*iterable)->args[2]) {
        node->expr = (*iterable)->args[0];
        node->condition = (*iterable)->args[1];
      }
      if (parser.isName("recursive")) {
        parser.next();
        node->recursive = true;
      }
      if (!parser.atEnd())
        return parser.fail("unexpected '" + parser.peek().text + "'");
      llvm::Expected<NodePtr> body = sequence({"else", "endfor"});
      if (!body)
        return body;
      node->body = *body;
      if (take() == "else") {
        llvm::Expected<NodePtr> otherwise = sequence({"endfor"});
        if (!otherwise)
          return otherwise;
        node->otherwise = *otherwise;
        take();
      }
      return node;
    }
    if (word == "set") {
      node->kind = Node::Set;
      llvm::Expected<std::string> target = parser.expectName();
      if (!target)
        return target.takeError();
      node->targets.push_back(*target);
      if (parser.isOp(".")) {
        parser.next();
        llvm::Expected<std::string> attribute = parser.expectName();
        if (!attribute)
          return attribute.takeError();
        node->attribute = *attribute;
      }
      if (parser.atEnd() && node->attribute.empty()) {
        node->kind = Node::SetBlock;
        return blockUntil("endset", std::move(node));
      }
      if (!parser.isOp("="))
        return parser.fail("unsupported construct: several targets, or a "
                           "set block's filter");
      parser.next();
      llvm::Expected<ExprPtr> value = parser.expression();
      if (!value)
        return value.takeError();
      node->expr = *value;
    } else if (word == "break" || word == "continue") {
      node->kind = word == "break" ? Node::Break : Node::Continue;
    } else if (word == "macro" || word == "with") {
      return word == "macro" ? macro(parser, std::move(node))
                             : with(parser, std::move(node));
    } else if (word == "filter") {
      node->kind = Node::FilterBlock;
      auto block = std::make_shared<Expr>();
      block->kind = Expr::Name;
      block->line = line;
      block->name = kFilteredBlock.str();
      llvm::Expected<ExprPtr> filters = parser.filterChain(block);
      if (!filters)
        return filters.takeError();
      node->expr = *filters;
      if (!parser.atEnd())
        return parser.fail("unexpected '" + parser.peek().text + "'");
      return blockUntil("endfilter", std::move(node));
    } else {
      return fail(line, "unsupported construct '" + word + "'");
    }
    if (!parser.atEnd())
      return parser.fail("unexpected '" + parser.peek().text + "'");
    return node;
  }

  /// `node`'s body: the statements up to `end`, consumed.
  llvm::Expected<NodePtr> blockUntil(llvm::StringRef end, NodePtr node) {
    llvm::Expected<NodePtr> body = sequence({end});
    if (!body)
      return body;
    node->body = *body;
    take();
    return node;
  }

  /// {% macro name(a, b=default, ...) %} ... {% endmacro %}
  llvm::Expected<NodePtr> macro(Parser &parser, NodePtr node) {
    node->kind = Node::Macro;
    llvm::Expected<std::string> macroName = parser.expectName();
    if (!macroName)
      return macroName.takeError();
    node->targets.push_back(*macroName);
    if (llvm::Error error = parser.expectOp("("))
      return std::move(error);
    while (!parser.isOp(")")) {
      llvm::Expected<std::string> parameter = parser.expectName();
      if (!parameter)
        return parameter.takeError();
      ExprPtr fallback;
      if (parser.isOp("=")) {
        parser.next();
        llvm::Expected<ExprPtr> value = parser.expression();
        if (!value)
          return value.takeError();
        fallback = *value;
      }
      node->assignments.push_back({*parameter, fallback});
      if (!parser.isOp(","))
        break;
      parser.next();
    }
    if (llvm::Error error = parser.expectOp(")"))
      return std::move(error);
    if (!parser.atEnd())
      return parser.fail("unexpected '" + parser.peek().text + "'");
    return blockUntil("endmacro", std::move(node));
  }

  /// {% with name = value, ... %} ... {% endwith %}
  llvm::Expected<NodePtr> with(Parser &parser, NodePtr node) {
    node->kind = Node::With;
    while (!parser.atEnd()) {
      llvm::Expected<std::string> target = parser.expectName();
      if (!target)
        return target.takeError();
      if (llvm::Error error = parser.expectOp("="))
        return std::move(error);
      llvm::Expected<ExprPtr> value = parser.expression();
      if (!value)
        return value.takeError();
      node->assignments.push_back({*target, *value});
      if (!parser.isOp(","))
        break;
      parser.next();
    }
    if (!parser.atEnd())
      return parser.fail("unexpected '" + parser.peek().text + "'");
    return blockUntil("endwith", std::move(node));
  }

  std::vector<Piece> pieces;
  size_t at = 0;
  std::string name;
  int depth = 0;
};

} // namespace

llvm::Expected<NodePtr> jinja::parse(llvm::StringRef source,
                                     llvm::StringRef name) {
  // Jinja drops the template's one trailing newline (keep_trailing_newline
  // is off).
  if (source.ends_with("\n"))
    source = source.drop_back(source.ends_with("\r\n") ? 2 : 1);
  llvm::Expected<std::vector<Piece>> pieces = cut(source, name);
  if (!pieces)
    return pieces.takeError();
  return Builder(std::move(*pieces), name).build();
}
