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
  llvm::Expected<Flow> runStatement(const Node &node);
  /// A for loop over `iterable`'s items, `depth` deep in a recursive one.
  llvm::Expected<Flow> loop(const Node &node, const Value &iterable,
                            int64_t depth);
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
  /// An argument of `expr` evaluated; none (undefined) where it has none.
  llvm::Expected<Value> evalArg(const Expr &expr, size_t index);
  llvm::Expected<Value> collection(const Expr &expr);
  llvm::Expected<Value> item(const Expr &expr);
  llvm::Expected<Value> slice(const Expr &expr);
  llvm::Expected<Value> unary(const Expr &expr);
  llvm::Expected<Value> binary(const Expr &expr);
  llvm::Expected<Value> filter(const Expr &expr, Value value);
  llvm::Expected<bool> test(const Expr &expr, const Value &value);
  /// The values of a call's, filter's or test's arguments after its first
  /// (the callee, or the value filtered or tested).
  llvm::Error arguments(const Expr &expr, Values &args, Keywords &keywords);
  /// What `body` renders, as a string (a macro's, a block's), its output
  /// kept apart from the render's.
  llvm::Expected<std::string> capture(const Node &body, int line);
  /// A macro as a function: its body rendered with its parameters bound,
  /// seeing the template's names but not its caller's.
  Value macro(const Node &node);
  /// Enters a macro or a recursive loop's call, bounded (each one is a
  /// render of a body on the stack).
  llvm::Error enterCall(int line);

  Namespaces namespaces;
  std::vector<llvm::StringMap<Value>> scopes;
  int64_t iterations = 0;
  int calls = 0; // macro and recursive loop calls in progress
  static constexpr int kMaxCalls = 32;
  /// Statements being run, inside one another (through calls too): each
  /// is a frame on the stack, so the depth of all is bounded.
  int running = 0;
  static constexpr int kMaxRunning = 1024;
};

llvm::Error Renderer::enterCall(int line) {
  if (calls >= kMaxCalls)
    return failAt(line, "macro or recursive loop calls nested deeper than " +
                            llvm::Twine(kMaxCalls));
  ++calls;
  return llvm::Error::success();
}

llvm::Expected<std::string> Renderer::capture(const Node &body, int line) {
  TextBuilder outer = std::move(out);
  out = TextBuilder(line);
  llvm::Expected<Flow> flow = run(body);
  std::string text = out.take();
  out = std::move(outer);
  if (!flow)
    return flow.takeError();
  return text;
}

Value Renderer::macro(const Node &node) {
  const Node *definition = &node;
  return Value::of(jinja::Function([this, definition](
                                       Values &args, Keywords &keywords,
                                       int line) -> llvm::Expected<Value> {
    const std::string &name = definition->targets[0];
    const auto &parameters = definition->assignments;
    if (args.size() > parameters.size())
      return failAt(line, llvm::formatv("macro '{0}' takes not more than "
                                        "{1} argument(s)",
                                        name, parameters.size()));
    llvm::StringMap<Value> bound;
    for (auto [index, arg] : llvm::enumerate(args))
      bound[parameters[index].first] = arg;
    for (const auto &keyword : keywords) {
      const std::string &key = keyword.first;
      if (llvm::none_of(parameters,
                        [&](const auto &p) { return p.first == key; }))
        return failAt(line, "macro '" + name + "' takes no keyword argument '" +
                                key + "'");
      bound[key] = keyword.second;
    }
    if (llvm::Error error = enterCall(line))
      return std::move(error);
    // The template's names and the parameters, not the caller's.
    std::vector<llvm::StringMap<Value>> callers = std::move(scopes);
    scopes = {callers.front(), std::move(bound)};
    llvm::Expected<std::string> text = [&]() -> llvm::Expected<std::string> {
      for (const auto &[parameter, fallback] : parameters)
        if (!scopes.back().count(parameter)) {
          llvm::Expected<Value> value = fallback ? eval(*fallback) : Value();
          if (!value)
            return value.takeError();
          scopes.back()[parameter] = *value;
        }
      return capture(*definition->body, line);
    }();
    callers.front() = std::move(scopes.front());
    scopes = std::move(callers);
    --calls;
    if (!text)
      return text.takeError();
    return Value::of(std::move(*text));
  }));
}

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
  return applyBinary(op, *left, *right, expr.line);
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

llvm::Expected<Value> Renderer::evalArg(const Expr &expr, size_t index) {
  if (index >= expr.args.size() || !expr.args[index])
    return Value();
  return eval(*expr.args[index]);
}

/// [a, b] and {"k": v}.
llvm::Expected<Value> Renderer::collection(const Expr &expr) {
  bool isList = expr.kind == Expr::ListOf;
  ItemsBuilder items(isList ? Value::List : Value::Dict, expr.line);
  for (size_t i = 0; i < expr.args.size(); ++i) {
    llvm::Expected<Value> item = evalArg(expr, i);
    if (!item)
      return item;
    if (llvm::Error error =
            isList ? items.append(*item) : items.add(expr.keys[i], *item))
      return std::move(error);
  }
  return items.take();
}

/// x[i]: a dict's key, a list's or a string's Python index.
llvm::Expected<Value> Renderer::item(const Expr &expr) {
  llvm::Expected<Value> object = evalArg(expr, 0), index = evalArg(expr, 1);
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
    std::optional<size_t> at = pythonIndex(asInt(*index), object->list->size());
    return at ? (*object->list)[*at] : Value();
  }
  if (object->kind == Value::String) {
    std::vector<std::string> chars = characters(object->string);
    std::optional<size_t> at = pythonIndex(asInt(*index), chars.size());
    return at ? Value::of(chars[*at]) : Value();
  }
  return Value();
}

/// x[start:stop:step] of a string or a list, as Python slices.
llvm::Expected<Value> Renderer::slice(const Expr &expr) {
  llvm::Expected<Value> object = evalArg(expr, 0);
  if (!object)
    return object;
  std::optional<int64_t> bounds[3];
  for (int part = 0; part < 3; ++part) {
    llvm::Expected<Value> bound = evalArg(expr, part + 1);
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

/// not x, +x, -x.
llvm::Expected<Value> Renderer::unary(const Expr &expr) {
  llvm::Expected<Value> value = evalArg(expr, 0);
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

llvm::Expected<Value> Renderer::eval(const Expr &expr) {
  auto evalArg = [&](size_t index) { return this->evalArg(expr, index); };
  switch (expr.kind) {
  case Expr::Literal:
    return expr.value;
  case Expr::Name:
    return lookup(expr.name);
  case Expr::ListOf:
  case Expr::DictOf:
    return collection(expr);
  case Expr::Attr: {
    llvm::Expected<Value> object = evalArg(0);
    if (!object)
      return object;
    return attributeOf(*object, expr.name, expr.line);
  }
  case Expr::Item:
    return item(expr);
  case Expr::Slice:
    return slice(expr);
  case Expr::Call: {
    llvm::Expected<Value> callee = evalArg(0);
    if (!callee)
      return callee;
    if (!callee->function) // a function, or a recursive loop's `loop`
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
  case Expr::Unary:
    return unary(expr);
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
  if (running >= kMaxRunning)
    return failAt(node.line, "statements nested deeper than " +
                                 llvm::Twine(kMaxRunning) +
                                 " through macro calls");
  ++running;
  llvm::Expected<Flow> flow = runStatement(node);
  --running;
  return flow;
}

llvm::Expected<Renderer::Flow> Renderer::runStatement(const Node &node) {
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
    return loop(node, *iterable, 1);
  }
  case Node::SetBlock: {
    llvm::Expected<std::string> body = capture(*node.body, node.line);
    if (!body)
      return body.takeError();
    scopes.back()[node.targets[0]] = Value::of(std::move(*body));
    return Flow::Normal;
  }
  case Node::Macro:
    scopes.back()[node.targets[0]] = macro(node);
    return Flow::Normal;
  case Node::With: {
    // The values are the enclosing scope's, bound in a scope of the block.
    llvm::StringMap<Value> bound;
    for (const auto &[target, value] : node.assignments) {
      llvm::Expected<Value> evaluated = eval(*value);
      if (!evaluated)
        return evaluated.takeError();
      bound[target] = *evaluated;
    }
    scopes.push_back(std::move(bound));
    llvm::Expected<Flow> flow = run(*node.body);
    scopes.pop_back();
    return flow;
  }
  case Node::FilterBlock: {
    llvm::Expected<std::string> body = capture(*node.body, node.line);
    if (!body)
      return body.takeError();
    scopes.push_back({});
    scopes.back()[kFilteredBlock] = Value::of(std::move(*body));
    llvm::Expected<Value> filtered = eval(*node.expr);
    scopes.pop_back();
    if (!filtered)
      return filtered.takeError();
    if (llvm::Error error = emit(text(*filtered), node.line))
      return std::move(error);
    return Flow::Normal;
  }
  }
  return Flow::Normal;
}

llvm::Expected<Renderer::Flow>
Renderer::loop(const Node &node, const Value &iterable, int64_t depth) {
  llvm::Expected<Value> all = iterate(iterable, node.line);
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
    std::pair<const char *, Value> loopFields[] = {
        {"index", Value::of(i + 1)},
        {"index0", Value::of(i)},
        {"revindex", Value::of(n - i)},
        {"revindex0", Value::of(n - i - 1)},
        {"first", Value::of(i == 0)},
        {"last", Value::of(i == n - 1)},
        {"length", Value::of(n)},
        {"previtem", i > 0 ? items[i - 1] : Value()},
        {"nextitem", i + 1 < n ? items[i + 1] : Value()},
        {"depth", Value::of(depth)},
        {"depth0", Value::of(depth - 1)}};
    ItemsBuilder fields(Value::Dict, node.line);
    for (auto &[key, field] : loopFields) {
      if (llvm::Error error = fields.add(key, std::move(field))) {
        scopes.pop_back();
        return std::move(error);
      }
    }
    Value loopValue = fields.take();
    if (node.recursive) // loop(items): the body over them, one deeper
      loopValue.function = std::make_shared<jinja::Function>(
          [this, &node, depth](Values &args, Keywords &,
                               int line) -> llvm::Expected<Value> {
            if (args.size() != 1)
              return failAt(line, "loop() takes the items to walk");
            if (llvm::Error error = enterCall(line))
              return std::move(error);
            TextBuilder outer = std::move(out);
            out = TextBuilder(line);
            llvm::Expected<Flow> flow = this->loop(node, args[0], depth + 1);
            std::string text = out.take();
            out = std::move(outer);
            --calls;
            if (!flow)
              return flow.takeError();
            return Value::of(std::move(text));
          });
    scopes.back()["loop"] = std::move(loopValue);
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
  parsed.source = source.str();
  parsed.root = *root;
  return std::move(parsed);
}

bool ChatTemplate::quotes(llvm::StringRef text) const {
  return llvm::StringRef(source).contains(("'" + text + "'").str()) ||
         llvm::StringRef(source).contains(("\"" + text + "\"").str());
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
