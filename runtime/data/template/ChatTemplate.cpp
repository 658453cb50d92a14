//===- ChatTemplate.cpp - rendering a model's own chat template -----------===//
//
// Runs the tree JinjaParse.cpp makes: statements (a for loop has its own
// scope, which is why templates keep state in a namespace), and
// expressions with Python's operators (and/or give an operand, comparisons,
// arithmetic, slices) over JinjaValues.cpp's values and JinjaLibrary.cpp's
// tests, filters and methods.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/ChatTemplate.h"

#include "runtime/data/template/Jinja.h"

#include "support/Json.h"
#include "support/ReadFile.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace twill;
using namespace twill::jinja;

namespace {

/// The most loop iterations a render may take (nested loops multiply).
constexpr int64_t kMaxIterations = int64_t(1) << 20;

class Renderer {
public:
  explicit Renderer(const Value &variables) {
    scopes.emplace_back();
    for (const auto &[key, value] : variables.dict->items)
      scopes.back()[key] = value;
    defineGlobals(scopes.front(), namespaces);
  }

  enum class Flow { Normal, Break, Continue };
  llvm::Expected<Flow> run(const Node &node);
  /// The rendered text, bounded as any string made; errors name no line
  /// (emit gives each its node's).
  TextBuilder out{0};

private:
  llvm::Error emit(llvm::StringRef piece, int line) {
    if (llvm::Error error = out.append(piece))
      return failAt(line, llvm::toString(std::move(error)));
    return llvm::Error::success();
  }
  Value lookup(llvm::StringRef name) const {
    for (auto scope = scopes.rbegin(); scope != scopes.rend(); ++scope)
      if (auto it = scope->find(name); it != scope->end())
        return it->second;
    return Value();
  }
  llvm::Expected<Value> eval(const Expr &expr);
  llvm::Expected<Value> binary(const Expr &expr);
  llvm::Expected<Value> filter(const Expr &expr, Value value);
  llvm::Expected<bool> test(const Expr &expr, const Value &value);
  /// The values of a call's, filter's or test's arguments after its first
  /// (the callee, or the value filtered or tested).
  llvm::Error arguments(const Expr &expr, Values &args, Keywords &keywords);

  Namespaces namespaces;
  std::vector<llvm::StringMap<Value>> scopes;
  int64_t iterations = 0;
};

llvm::Expected<Value> Renderer::binary(const Expr &expr) {
  const std::string &op = expr.name;
  llvm::Expected<Value> left = eval(*expr.args[0]);
  if (!left)
    return left;
  // and/or give one of their operands, short-circuiting.
  if (op == "and" || op == "or") {
    if (truthy(*left) == (op == "or"))
      return left;
    return eval(*expr.args[1]);
  }
  llvm::Expected<Value> right = eval(*expr.args[1]);
  if (!right)
    return right;
  const Value &a = *left, &b = *right;
  if (op == "==" || op == "!=")
    return Value::of(equal(a, b) == (op == "=="));
  if (op == "~" ||
      (op == "+" && a.kind == Value::String && b.kind == Value::String)) {
    TextBuilder joined(expr.line);
    if (llvm::Error error = joined.append(text(a)))
      return std::move(error);
    if (llvm::Error error = joined.append(text(b)))
      return std::move(error);
    return Value::of(joined.take());
  }
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.kind == Value::String)
      found = llvm::StringRef(b.string).contains(text(a));
    else if (b.kind == Value::List)
      found =
          llvm::any_of(*b.list, [&](const Value &v) { return equal(a, v); });
    else if (b.kind == Value::Dict)
      found = b.dict->find(text(a)) != nullptr;
    else if (b.kind != Value::Undefined)
      return failAt(expr.line, "'in' needs a string, list or dict");
    return Value::of(found == (op == "in"));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    int order;
    if (isNumber(a) && isNumber(b))
      order = asDouble(a) < asDouble(b) ? -1 : asDouble(a) > asDouble(b);
    else if (a.kind == Value::String && b.kind == Value::String)
      order = a.string.compare(b.string);
    else
      return failAt(expr.line, "'" + op + "' compares numbers or strings");
    bool result = op == "<"    ? order < 0
                  : op == ">"  ? order > 0
                  : op == "<=" ? order <= 0
                               : order >= 0;
    return Value::of(result);
  }
  if (op == "+" && a.kind == Value::List && b.kind == Value::List) {
    ItemsBuilder joined(Value::List, expr.line);
    if (llvm::Error error = joined.append(*a.list))
      return std::move(error);
    if (llvm::Error error = joined.append(*b.list))
      return std::move(error);
    return joined.take();
  }
  // A sequence repeated (either side), sized before it is made.
  auto isSequence = [](const Value &v) {
    return v.kind == Value::String || v.kind == Value::List;
  };
  if (op == "*" && (isSequence(a) || isSequence(b))) {
    const Value &sequence = isSequence(a) ? a : b;
    llvm::Expected<uint64_t> times = timesOf(isSequence(a) ? b : a, expr.line);
    if (!times)
      return times.takeError();
    if (sequence.kind == Value::String) {
      TextBuilder repeated(expr.line);
      if (llvm::Error error = repeated.append(sequence.string, *times))
        return std::move(error);
      return Value::of(repeated.take());
    }
    ItemsBuilder repeated(Value::List, expr.line);
    if (llvm::Error error = repeated.append(*sequence.list, *times))
      return std::move(error);
    return repeated.take();
  }
  if (!isNumber(a) || !isNumber(b))
    return failAt(expr.line,
                  "'" + op + "' of '" + text(a) + "' and '" + text(b) + "'");
  bool integers = a.kind != Value::Float && b.kind != Value::Float;
  if (op == "**") {
    if (integers && asInt(b) >= 0) {
      // By squaring: a step per bit of the exponent, not per its value
      // (1 ** 10**18). A square that overflows is a factor of the result.
      int64_t result = 1, base = asInt(a);
      for (int64_t exponent = asInt(b); exponent; exponent >>= 1)
        if (((exponent & 1) && __builtin_mul_overflow(result, base, &result)) ||
            (exponent > 1 && __builtin_mul_overflow(base, base, &base)))
          return failAt(expr.line, "an integer past 64 bits");
      return Value::of(result);
    }
    return Value::of(std::pow(asDouble(a), asDouble(b)));
  }
  if (op == "/") {
    if (asDouble(b) == 0)
      return failAt(expr.line, "division by zero");
    return Value::of(asDouble(a) / asDouble(b));
  }
  if (integers) {
    int64_t x = asInt(a), y = asInt(b), result;
    if ((op == "//" || op == "%") && y == 0)
      return failAt(expr.line, "division by zero");
    bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &result)
                    : op == "-" ? __builtin_sub_overflow(x, y, &result)
                    : op == "*" ? __builtin_mul_overflow(x, y, &result)
                                : (x == INT64_MIN && y == -1);
    if (overflow)
      return failAt(expr.line, "an integer past 64 bits");
    if (op == "+" || op == "-" || op == "*")
      return Value::of(result);
    int64_t quotient = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    if (op == "//")
      return Value::of(quotient);
    return Value::of(x - quotient * y); // Python's %
  }
  double x = asDouble(a), y = asDouble(b);
  if (op == "+")
    return Value::of(x + y);
  if (op == "-")
    return Value::of(x - y);
  if (op == "*")
    return Value::of(x * y);
  if (y == 0)
    return failAt(expr.line, "division by zero");
  if (op == "//")
    return Value::of(std::floor(x / y));
  return Value::of(x - std::floor(x / y) * y);
}

llvm::Error Renderer::arguments(const Expr &expr, Values &args,
                                Keywords &keywords) {
  for (size_t i = 1; i < expr.args.size(); ++i) {
    llvm::Expected<Value> arg = eval(*expr.args[i]);
    if (!arg)
      return arg.takeError();
    args.push_back(*arg);
  }
  for (auto &[key, argument] : expr.keywords) {
    llvm::Expected<Value> arg = eval(*argument);
    if (!arg)
      return arg.takeError();
    keywords.push_back({key, *arg});
  }
  return llvm::Error::success();
}

llvm::Expected<bool> Renderer::test(const Expr &expr, const Value &value) {
  Values args;
  Keywords keywords;
  if (llvm::Error error = arguments(expr, args, keywords))
    return std::move(error);
  return applyTest(expr.name, value, args, expr.line);
}

llvm::Expected<Value> Renderer::filter(const Expr &expr, Value value) {
  Values args;
  Keywords keywords;
  if (llvm::Error error = arguments(expr, args, keywords))
    return std::move(error);
  return applyFilter(expr.name, value, args, keywords, expr.line);
}

llvm::Expected<Value> Renderer::eval(const Expr &expr) {
  auto evalArg = [&](size_t index) -> llvm::Expected<Value> {
    if (index >= expr.args.size() || !expr.args[index])
      return Value();
    return eval(*expr.args[index]);
  };
  switch (expr.kind) {
  case Expr::Literal:
    return expr.value;
  case Expr::Name:
    return lookup(expr.name);
  case Expr::ListOf:
  case Expr::DictOf: {
    bool isList = expr.kind == Expr::ListOf;
    ItemsBuilder items(isList ? Value::List : Value::Dict, expr.line);
    for (size_t i = 0; i < expr.args.size(); ++i) {
      llvm::Expected<Value> item = evalArg(i);
      if (!item)
        return item;
      if (llvm::Error error =
              isList ? items.append(*item) : items.add(expr.keys[i], *item))
        return std::move(error);
    }
    return items.take();
  }
  case Expr::Attr: {
    llvm::Expected<Value> object = evalArg(0);
    if (!object)
      return object;
    return attributeOf(*object, expr.name, expr.line);
  }
  case Expr::Item: {
    llvm::Expected<Value> object = evalArg(0), index = evalArg(1);
    if (!object)
      return object;
    if (!index)
      return index;
    if (object->kind == Value::Dict)
      return attributeOf(*object, text(*index), expr.line);
    if (object->kind == Value::Undefined)
      return failAt(expr.line,
                    "an undefined value has no item '" + text(*index) + "'");
    // Jinja's item of another type is undefined (Python's TypeError, caught).
    if (index->kind != Value::Int && index->kind != Value::Bool)
      return Value();
    if (object->kind == Value::List) {
      std::optional<size_t> at =
          pythonIndex(asInt(*index), object->list->size());
      return at ? (*object->list)[*at] : Value();
    }
    if (object->kind == Value::String) {
      std::vector<std::string> chars = characters(object->string);
      std::optional<size_t> at = pythonIndex(asInt(*index), chars.size());
      return at ? Value::of(chars[*at]) : Value();
    }
    return Value();
  }
  case Expr::Slice: {
    llvm::Expected<Value> object = evalArg(0);
    if (!object)
      return object;
    std::optional<int64_t> bounds[3];
    for (int part = 0; part < 3; ++part) {
      llvm::Expected<Value> bound = evalArg(part + 1);
      if (!bound)
        return bound;
      if (bound->kind == Value::Int || bound->kind == Value::Bool)
        bounds[part] = asInt(*bound);
      else if (bound->kind != Value::None && bound->kind != Value::Undefined)
        return Value(); // as an item's
    }
    bool isString = object->kind == Value::String;
    std::vector<std::string> chars;
    size_t size;
    if (isString) {
      chars = characters(object->string);
      size = chars.size();
    } else if (object->kind == Value::List) {
      size = object->list->size();
    } else {
      return failAt(expr.line, "only strings and lists slice");
    }
    int64_t step = bounds[2].value_or(1);
    if (step == 0)
      return failAt(expr.line, "a slice's step is not 0");
    auto clamp = [&](std::optional<int64_t> bound, int64_t fallback) {
      if (!bound)
        return fallback;
      int64_t b = *bound < 0 ? *bound + int64_t(size) : *bound;
      return step > 0 ? std::clamp<int64_t>(b, 0, size)
                      : std::clamp<int64_t>(b, -1, int64_t(size) - 1);
    };
    int64_t start = clamp(bounds[0], step > 0 ? 0 : int64_t(size) - 1);
    int64_t stop = clamp(bounds[1], step > 0 ? int64_t(size) : -1);
    // Counted first: a step past the items would overflow.
    uint64_t count = rangeLength(start, stop, step);
    std::string joined;
    ItemsBuilder items(Value::List, expr.line);
    for (uint64_t k = 0; k < count; ++k) {
      size_t at = size_t(start + int64_t(k) * step);
      if (isString)
        joined += chars[at];
      else if (llvm::Error error = items.append((*object->list)[at]))
        return std::move(error);
    }
    return isString ? Value::of(joined) : items.take();
  }
  case Expr::Call: {
    llvm::Expected<Value> callee = evalArg(0);
    if (!callee)
      return callee;
    if (callee->kind != Value::Function)
      return failAt(expr.line, "'" + text(*callee) + "' is not callable");
    Values args;
    Keywords keywords;
    if (llvm::Error error = arguments(expr, args, keywords))
      return std::move(error);
    return (*callee->function)(args, keywords, expr.line);
  }
  case Expr::Filter: {
    llvm::Expected<Value> value = evalArg(0);
    if (!value)
      return value;
    return filter(expr, *value);
  }
  case Expr::Test: {
    llvm::Expected<Value> value = evalArg(0);
    if (!value)
      return value;
    llvm::Expected<bool> passed = test(expr, *value);
    if (!passed)
      return passed.takeError();
    return Value::of(*passed != expr.negated);
  }
  case Expr::Unary: {
    llvm::Expected<Value> value = evalArg(0);
    if (!value)
      return value;
    if (expr.name == "not")
      return Value::of(!truthy(*value));
    if (!isNumber(*value))
      return failAt(expr.line, "'" + expr.name + "' of '" + text(*value) + "'");
    if (expr.name == "+")
      return *value;
    if (value->kind != Value::Float && asInt(*value) == INT64_MIN)
      return failAt(expr.line, "an integer past 64 bits");
    return value->kind == Value::Float ? Value::of(-value->number)
                                       : Value::of(-asInt(*value));
  }
  case Expr::Binary:
    return binary(expr);
  case Expr::Ternary: {
    llvm::Expected<Value> condition = evalArg(1);
    if (!condition)
      return condition;
    return truthy(*condition) ? evalArg(0) : evalArg(2);
  }
  }
  return Value();
}

llvm::Expected<Renderer::Flow> Renderer::run(const Node &node) {
  switch (node.kind) {
  case Node::Sequence:
    for (const NodePtr &child : node.children) {
      llvm::Expected<Flow> flow = run(*child);
      if (!flow || *flow != Flow::Normal)
        return flow;
    }
    return Flow::Normal;
  case Node::Text:
    if (llvm::Error error = emit(node.text, node.line))
      return std::move(error);
    return Flow::Normal;
  case Node::Output: {
    llvm::Expected<Value> value = eval(*node.expr);
    if (!value)
      return value.takeError();
    if (llvm::Error error = emit(text(*value), node.line))
      return std::move(error);
    return Flow::Normal;
  }
  case Node::If:
    for (auto &[condition, body] : node.branches) {
      bool taken = !condition;
      if (condition) {
        llvm::Expected<Value> value = eval(*condition);
        if (!value)
          return value.takeError();
        taken = truthy(*value);
      }
      if (taken)
        return run(*body);
    }
    return Flow::Normal;
  case Node::Set: {
    llvm::Expected<Value> value = eval(*node.expr);
    if (!value)
      return value.takeError();
    if (node.attribute.empty()) {
      scopes.back()[node.targets[0]] = *value;
      return Flow::Normal;
    }
    Value space = lookup(node.targets[0]);
    if (space.kind != Value::Dict || !space.isNamespace)
      return failAt(node.line, "'" + node.targets[0] +
                                   "' is not a namespace: only a namespace's "
                                   "attributes are set");
    if (llvm::Error error =
            namespaces.set(space, node.attribute, *value, node.line))
      return std::move(error);
    return Flow::Normal;
  }
  case Node::Break:
    return Flow::Break;
  case Node::Continue:
    return Flow::Continue;
  case Node::For: {
    llvm::Expected<Value> iterable = eval(*node.expr);
    if (!iterable)
      return iterable.takeError();
    llvm::Expected<Value> all = iterate(*iterable, node.line);
    if (!all)
      return all.takeError();
    // The loop's own scope: its variables and sets stay inside it.
    scopes.emplace_back();
    auto bind = [&](const Value &item) -> llvm::Error {
      if (node.targets.size() == 1) {
        scopes.back()[node.targets[0]] = item;
        return llvm::Error::success();
      }
      if (item.kind != Value::List || item.list->size() != node.targets.size())
        return failAt(node.line, "cannot unpack '" + text(item) + "' into " +
                                     std::to_string(node.targets.size()) +
                                     " names");
      for (auto [target, part] : llvm::zip_equal(node.targets, *item.list))
        scopes.back()[target] = part;
      return llvm::Error::success();
    };
    Values items;
    for (const Value &item : *all->list) {
      if (node.condition) {
        if (llvm::Error error = bind(item)) {
          scopes.pop_back();
          return std::move(error);
        }
        llvm::Expected<Value> keep = eval(*node.condition);
        if (!keep) {
          scopes.pop_back();
          return keep.takeError();
        }
        if (!truthy(*keep))
          continue;
      }
      items.push_back(item);
    }
    for (auto [index, item] : llvm::enumerate(items)) {
      if (++iterations > kMaxIterations) {
        scopes.pop_back();
        return failAt(node.line, "more than 2^20 loop iterations");
      }
      scopes.back().clear();
      if (llvm::Error error = bind(item)) {
        scopes.pop_back();
        return std::move(error);
      }
      int64_t i = int64_t(index), n = int64_t(items.size());
      std::pair<const char *, Value> fields[] = {
          {"index", Value::of(i + 1)},
          {"index0", Value::of(i)},
          {"revindex", Value::of(n - i)},
          {"revindex0", Value::of(n - i - 1)},
          {"first", Value::of(i == 0)},
          {"last", Value::of(i == n - 1)},
          {"length", Value::of(n)},
          {"previtem", i > 0 ? items[i - 1] : Value()},
          {"nextitem", i + 1 < n ? items[i + 1] : Value()}};
      ItemsBuilder loop(Value::Dict, node.line);
      for (auto &[key, field] : fields) {
        if (llvm::Error error = loop.add(key, std::move(field))) {
          scopes.pop_back();
          return std::move(error);
        }
      }
      scopes.back()["loop"] = loop.take();
      llvm::Expected<Flow> flow = run(*node.body);
      if (!flow) {
        scopes.pop_back();
        return flow;
      }
      if (*flow == Flow::Break)
        break;
    }
    scopes.pop_back();
    if (items.empty() && node.otherwise)
      return run(*node.otherwise);
    return Flow::Normal;
  }
  }
  return Flow::Normal;
}

} // namespace

ChatTemplate::ChatTemplate(ChatTemplate &&) noexcept = default;
ChatTemplate &ChatTemplate::operator=(ChatTemplate &&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

llvm::Expected<ChatTemplate> ChatTemplate::parse(llvm::StringRef source,
                                                 llvm::StringRef name) {
  llvm::Expected<NodePtr> root = jinja::parse(source, name);
  if (!root)
    return root.takeError();
  ChatTemplate parsed;
  parsed.name = name.str();
  parsed.root = *root;
  return std::move(parsed);
}

llvm::Expected<ChatTemplate> ChatTemplate::load(llvm::StringRef path) {
  if (!path.ends_with(".json")) {
    auto file = readRegularFile(path, kMaxTokenizerBytes);
    if (!file)
      return file.takeError();
    // transformers reads a template as UTF-8 and refuses anything else;
    // rendered, its bytes would make text no tokenizer reads as it does.
    llvm::StringRef text = (*file)->getBuffer();
    size_t offset = 0;
    if (!llvm::json::isUTF8(text, &offset))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}: is not UTF-8 text (byte {1} starts no UTF-8 "
                        "character{2}): save it as UTF-8",
                        path, offset,
                        text.starts_with("\xff\xfe") ||
                                text.starts_with("\xfe\xff")
                            ? "; it begins as UTF-16 does"
                            : "")
              .str());
    return parse(text, path);
  }
  llvm::Expected<llvm::json::Value> config =
      readJsonFile(path, kMaxTokenizerBytes);
  if (!config)
    return config.takeError();
  const llvm::json::Object *object = config->getAsObject();
  const llvm::json::Value *chosen =
      object ? object->get("chat_template") : nullptr;
  // A list of named templates: the default one.
  if (const llvm::json::Array *named = chosen ? chosen->getAsArray() : nullptr)
    for (const llvm::json::Value &entry : *named)
      if (const llvm::json::Object *item = entry.getAsObject();
          item && item->getString("name") == "default")
        chosen = item->get("template");
  std::optional<llvm::StringRef> source =
      chosen ? chosen->getAsString() : std::nullopt;
  if (!source)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": has no chat_template (a string, "
                                          "or a list with one named "
                                          "\"default\")");
  return parse(*source, path);
}

llvm::Expected<std::string>
ChatTemplate::render(llvm::StringRef variablesJson) const {
  llvm::Expected<Value> variables = readJson(variablesJson);
  if (!variables)
    return variables.takeError();
  if (variables->kind != Value::Dict)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the variables must be a JSON object");
  Renderer renderer(*variables);
  llvm::Expected<Renderer::Flow> flow = renderer.run(*root);
  if (!flow)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": " +
                                       llvm::toString(flow.takeError()));
  return renderer.out.take();
}
