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
    defineGlobals(scopes.front());
  }

  enum class Flow { Normal, Break, Continue };
  llvm::Expected<Flow> run(const Node &node);
  std::string out;

private:
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
  if (op == "~")
    return Value::of(text(a) + text(b));
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
  if (op == "+" && a.kind == Value::String && b.kind == Value::String)
    return Value::of(a.string + b.string);
  if (op == "+" && a.kind == Value::List && b.kind == Value::List) {
    Values joined = *a.list;
    joined.insert(joined.end(), b.list->begin(), b.list->end());
    return Value::of(std::move(joined));
  }
  if (op == "*" && a.kind == Value::String && isNumber(b)) {
    std::string repeated;
    for (int64_t i = 0; i < asInt(b); ++i) {
      repeated += a.string;
      if (repeated.size() > kMaxText)
        return failAt(expr.line, "a string of more than 64 MiB");
    }
    return Value::of(repeated);
  }
  if (!isNumber(a) || !isNumber(b))
    return failAt(expr.line,
                  "'" + op + "' of '" + text(a) + "' and '" + text(b) + "'");
  bool integers = a.kind != Value::Float && b.kind != Value::Float;
  if (op == "**") {
    if (integers && asInt(b) >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < asInt(b) && result != 0; ++i)
        if (__builtin_mul_overflow(result, asInt(a), &result))
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
  case Expr::ListOf: {
    Values items;
    for (size_t i = 0; i < expr.args.size(); ++i) {
      llvm::Expected<Value> item = evalArg(i);
      if (!item)
        return item;
      items.push_back(*item);
    }
    return Value::of(std::move(items));
  }
  case Expr::DictOf: {
    Value dict = Value::emptyDict();
    for (size_t i = 0; i < expr.args.size(); ++i) {
      llvm::Expected<Value> item = evalArg(i);
      if (!item)
        return item;
      dict.dict->items.push_back({expr.keys[i], *item});
    }
    return dict;
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
    if (!isNumber(*index))
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
      if (isNumber(*bound))
        bounds[part] = asInt(*bound);
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
    Values items;
    std::string joined;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (isString)
        joined += chars[i];
      else
        items.push_back((*object->list)[i]);
    }
    return isString ? Value::of(joined) : Value::of(std::move(items));
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
    llvm::Expected<Value> result = (*callee->function)(args, keywords);
    if (!result)
      return failAt(expr.line, llvm::toString(result.takeError()));
    return result;
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
    out += node.text;
    if (out.size() > kMaxText)
      return failAt(node.line, "the text passes 64 MiB");
    return Flow::Normal;
  case Node::Output: {
    llvm::Expected<Value> value = eval(*node.expr);
    if (!value)
      return value.takeError();
    out += text(*value);
    if (out.size() > kMaxText)
      return failAt(node.line, "the text passes 64 MiB");
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
    if (Value *existing = space.dict->find(node.attribute))
      *existing = *value;
    else
      space.dict->items.push_back({node.attribute, *value});
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
    llvm::Expected<Values> all = iterate(*iterable, node.line);
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
    for (const Value &item : *all) {
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
      Value loop = Value::emptyDict();
      int64_t i = int64_t(index), n = int64_t(items.size());
      loop.dict->items = {{"index", Value::of(i + 1)},
                          {"index0", Value::of(i)},
                          {"revindex", Value::of(n - i)},
                          {"revindex0", Value::of(n - i - 1)},
                          {"first", Value::of(i == 0)},
                          {"last", Value::of(i == n - 1)},
                          {"length", Value::of(n)},
                          {"previtem", i > 0 ? items[i - 1] : Value()},
                          {"nextitem", i + 1 < n ? items[i + 1] : Value()}};
      scopes.back()["loop"] = loop;
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
    return parse((*file)->getBuffer(), path);
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
  return std::move(renderer.out);
}
