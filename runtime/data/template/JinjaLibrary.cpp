//===- JinjaLibrary.cpp - what chat templates call ------------------------===//
//
// Jinja's tests and filters that chat templates use, Python's string and
// dict methods, and the globals transformers gives a template
// (raise_exception, namespace, range, strftime_now).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/Jinja.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <ctime>

using namespace twill;
using namespace twill::jinja;

static const llvm::StringLiteral kTests[] = {
    "defined", "undefined", "none",     "string",   "number",
    "integer", "float",     "boolean",  "true",     "false",
    "mapping", "iterable",  "sequence", "callable", "even",
    "odd",     "eq",        "equalto",  "sameas",   "divisibleby"};
static const llvm::StringLiteral kFilters[] = {
    "trim",   "tojson", "length",     "count",     "upper",   "lower",
    "string", "safe",   "int",        "float",     "abs",     "default",
    "d",      "first",  "last",       "list",      "reverse", "join",
    "items",  "map",    "selectattr", "rejectattr"};

bool jinja::hasTest(llvm::StringRef name) {
  return llvm::is_contained(kTests, name);
}
bool jinja::hasFilter(llvm::StringRef name) {
  return llvm::is_contained(kFilters, name);
}

/// Python's str.strip family: `chars` (none: whitespace) off each end.
static std::string stripped(llvm::StringRef s, const Value *chars, bool left,
                            bool right) {
  auto strip = [&](char c) {
    return chars && chars->kind == Value::String
               ? llvm::StringRef(chars->string).contains(c)
               : llvm::isSpace(c);
  };
  size_t begin = 0, end = s.size();
  while (left && begin < end && strip(s[begin]))
    ++begin;
  while (right && end > begin && strip(s[end - 1]))
    --end;
  return s.slice(begin, end).str();
}

void jinja::defineGlobals(llvm::StringMap<Value> &globals) {
  globals["raise_exception"] =
      Value::of(Function([](Values &args, Keywords &) -> llvm::Expected<Value> {
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "the template raised an exception: " +
                (args.empty() ? std::string() : text(args[0])));
      }));
  globals["namespace"] = Value::of(
      Function([](Values &, Keywords &keywords) -> llvm::Expected<Value> {
        Value space = Value::emptyDict();
        space.isNamespace = true;
        for (auto &[key, value] : keywords)
          space.dict->items.push_back({key, value});
        return space;
      }));
  globals["range"] =
      Value::of(Function([](Values &args, Keywords &) -> llvm::Expected<Value> {
        int64_t start = 0, stop = 0, step = 1;
        if (args.size() == 1)
          stop = asInt(args[0]);
        if (args.size() >= 2)
          start = asInt(args[0]), stop = asInt(args[1]);
        if (args.size() == 3)
          step = asInt(args[2]);
        if (step == 0 || args.empty() || args.size() > 3)
          return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                         "range() takes 1 to 3 arguments, "
                                         "a step other than 0");
        Values items;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          if (items.size() >= kMaxRange)
            return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                           "range() of more than 2^20 items");
          items.push_back(Value::of(i));
        }
        return Value::of(std::move(items));
      }));
  globals["strftime_now"] =
      Value::of(Function([](Values &args, Keywords &) -> llvm::Expected<Value> {
        std::time_t now = std::time(nullptr);
        char buffer[256];
        std::strftime(buffer, sizeof(buffer),
                      args.empty() ? "" : text(args[0]).c_str(),
                      std::localtime(&now));
        return Value::of(std::string(buffer));
      }));
}

/// Python's method `name` of a string or dict, bound to it.
static llvm::Expected<Value> methodOf(const Value &object, llvm::StringRef name,
                                      int line) {
  std::string methodName = name.str();
  auto unsupported = [&] {
    return failAt(line,
                  "unsupported method '" + methodName + "' of " +
                      (object.kind == Value::String ? "a string" : "a dict"));
  };
  if (object.kind == Value::String) {
    static const char *known[] = {
        "strip",      "lstrip", "rstrip", "startswith", "endswith",
        "split",      "upper",  "lower",  "replace",    "title",
        "capitalize", "count",  "find",   "join"};
    if (!llvm::is_contained(known, name))
      return unsupported();
    std::string s = object.string;
    return Value::of(Function(
        [s, methodName](Values &args, Keywords &) -> llvm::Expected<Value> {
          const Value *first = args.empty() ? nullptr : &args[0];
          if (methodName == "strip" || methodName == "lstrip" ||
              methodName == "rstrip")
            return Value::of(stripped(s, first, methodName != "rstrip",
                                      methodName != "lstrip"));
          if (methodName == "startswith" || methodName == "endswith") {
            Values prefixes =
                first && first->kind == Value::List ? *first->list : args;
            bool start = methodName == "startswith";
            return Value::of(llvm::any_of(prefixes, [&](const Value &p) {
              return start ? llvm::StringRef(s).starts_with(text(p))
                           : llvm::StringRef(s).ends_with(text(p));
            }));
          }
          if (methodName == "split") {
            Values parts;
            int64_t most = args.size() > 1 ? asInt(args[1]) : -1;
            if (!first || first->kind == Value::None) {
              llvm::SmallVector<llvm::StringRef> words;
              llvm::SplitString(s, words);
              for (llvm::StringRef word : words)
                parts.push_back(Value::of(word.str()));
              return Value::of(std::move(parts));
            }
            // As Python's str.split, which refuses these (an empty
            // separator would never end here).
            if (first->kind != Value::String)
              return llvm::createStringError(
                  llvm::inconvertibleErrorCode(),
                  "split() takes a string or none as its separator");
            if (first->string.empty())
              return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                             "split(): empty separator");
            llvm::SmallVector<llvm::StringRef> pieces;
            llvm::StringRef(s).split(pieces, first->string, int(most));
            for (llvm::StringRef piece : pieces)
              parts.push_back(Value::of(piece.str()));
            return Value::of(std::move(parts));
          }
          if (methodName == "upper")
            return Value::of(llvm::StringRef(s).upper());
          if (methodName == "lower")
            return Value::of(llvm::StringRef(s).lower());
          if (methodName == "replace") {
            if (args.size() < 2)
              return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                             "replace() takes 2 arguments");
            std::string from = text(args[0]), to = text(args[1]), out;
            int64_t most = args.size() > 2 ? asInt(args[2]) : -1;
            if (from.empty()) { // Python's: `to` around each character
              for (const std::string &c : characters(s)) {
                if (most != 0) {
                  out += to;
                  most -= most > 0;
                }
                out += c;
              }
              return Value::of(most != 0 ? out + to : out);
            }
            llvm::StringRef rest = s;
            for (size_t at; most != 0 && !from.empty() &&
                            (at = rest.find(from)) != llvm::StringRef::npos;
                 --most) {
              out += rest.take_front(at).str() + to;
              rest = rest.drop_front(at + from.size());
            }
            return Value::of(out + rest.str());
          }
          if (methodName == "title" || methodName == "capitalize") {
            std::string out =
                methodName == "capitalize" ? llvm::StringRef(s).lower() : s;
            bool start = true;
            for (char &c : out) {
              if (methodName == "title") {
                c = start ? llvm::toUpper(c) : llvm::toLower(c);
                start = !llvm::isAlpha(c);
              } else if (start && llvm::isAlpha(c)) {
                c = llvm::toUpper(c);
                start = false;
              }
            }
            return Value::of(out);
          }
          // Counts and places in characters, as Python's.
          if (methodName == "count") {
            std::string part = first ? text(*first) : "";
            return Value::of(part.empty()
                                 ? int64_t(characters(s).size()) + 1
                                 : int64_t(llvm::StringRef(s).count(part)));
          }
          if (methodName == "find") {
            size_t at = first ? s.find(text(*first)) : std::string::npos;
            return Value::of(at == std::string::npos
                                 ? int64_t(-1)
                                 : int64_t(characters(s.substr(0, at)).size()));
          }
          // join
          llvm::Expected<Values> items =
              first ? iterate(*first, 0) : llvm::Expected<Values>(Values());
          if (!items)
            return items.takeError();
          std::string out;
          for (auto [index, item] : llvm::enumerate(*items))
            out += (index ? s : "") + text(item);
          return Value::of(out);
        }));
  }
  if (object.kind == Value::Dict && !object.isNamespace) {
    static const char *known[] = {"items", "keys", "values", "get"};
    if (!llvm::is_contained(known, name))
      return unsupported();
    Value dict = object;
    return Value::of(Function(
        [dict, methodName](Values &args, Keywords &) -> llvm::Expected<Value> {
          if (methodName == "get") {
            Value *found =
                args.empty() ? nullptr : dict.dict->find(text(args[0]));
            return found ? *found : (args.size() > 1 ? args[1] : Value::none());
          }
          Values items;
          for (auto &[key, value] : dict.dict->items)
            items.push_back(methodName == "keys" ? Value::of(key)
                            : methodName == "values"
                                ? value
                                : Value::of(Values{Value::of(key), value}));
          return Value::of(std::move(items));
        }));
  }
  return failAt(line, "unsupported method '" + methodName + "'");
}

llvm::Expected<Value> jinja::attributeOf(const Value &object,
                                         llvm::StringRef name, int line) {
  switch (object.kind) {
  case Value::Dict:
    if (Value *found = object.dict->find(name))
      return *found;
    if (object.isNamespace)
      return Value();
    if (llvm::is_contained({"items", "keys", "values", "get"}, name))
      return methodOf(object, name, line);
    return Value();
  case Value::String:
    return methodOf(object, name, line);
  case Value::Undefined:
    return failAt(line, "an undefined value has no attribute '" + name + "'");
  default:
    return Value();
  }
}

/// Jinja's test `name` of `value` (with its `args`).
llvm::Expected<bool> jinja::applyTest(llvm::StringRef name, const Value &value,
                                      const Values &args, int line) {
  if (name == "defined")
    return value.kind != Value::Undefined;
  if (name == "undefined")
    return value.kind == Value::Undefined;
  if (name == "none")
    return value.kind == Value::None;
  if (name == "string")
    return value.kind == Value::String;
  if (name == "number")
    return value.kind == Value::Int || value.kind == Value::Float;
  if (name == "integer")
    return value.kind == Value::Int;
  if (name == "float")
    return value.kind == Value::Float;
  if (name == "boolean")
    return value.kind == Value::Bool;
  if (name == "true" || name == "false")
    return value.kind == Value::Bool && value.boolean == (name == "true");
  if (name == "mapping")
    return value.kind == Value::Dict;
  if (name == "iterable")
    return value.kind == Value::List || value.kind == Value::Dict ||
           value.kind == Value::String;
  if (name == "sequence")
    return value.kind == Value::List || value.kind == Value::String;
  if (name == "callable")
    return value.kind == Value::Function;
  if (name == "even" || name == "odd")
    return isNumber(value) && (asInt(value) % 2 == 0) == (name == "even");
  if ((name == "eq" || name == "equalto" || name == "sameas") &&
      args.size() == 1)
    return equal(value, args[0]);
  if (name == "divisibleby" && args.size() == 1 && asInt(args[0]) != 0)
    return isNumber(value) && asInt(value) % asInt(args[0]) == 0;
  return failAt(line, "unsupported test '" + name + "'");
}

llvm::Expected<Value> jinja::applyFilter(llvm::StringRef name,
                                         const Value &value, const Values &args,
                                         const Keywords &keywords, int line) {
  auto keyword = [&](llvm::StringRef key) -> const Value * {
    for (auto &[name, arg] : keywords)
      if (name == key)
        return &arg;
    return nullptr;
  };
  if (name == "trim")
    return Value::of(stripped(text(value), nullptr, true, true));
  if (name == "tojson") {
    std::optional<int64_t> indent;
    if (const Value *given = keyword("indent"); given && isNumber(*given))
      indent = asInt(*given);
    std::string out;
    toJson(value, indent, 0, out);
    return Value::of(out);
  }
  if (name == "length" || name == "count") {
    if (value.kind == Value::String)
      return Value::of(int64_t(characters(value.string).size()));
    if (value.kind == Value::List)
      return Value::of(int64_t(value.list->size()));
    if (value.kind == Value::Dict)
      return Value::of(int64_t(value.dict->items.size()));
    if (value.kind == Value::Undefined)
      return Value::of(int64_t(0));
    return failAt(line, "length of '" + text(value) + "'");
  }
  if (name == "upper")
    return Value::of(llvm::StringRef(text(value)).upper());
  if (name == "lower")
    return Value::of(llvm::StringRef(text(value)).lower());
  if (name == "string" || name == "safe")
    return Value::of(text(value));
  if (name == "int")
    return Value::of(isNumber(value) ? int64_t(asDouble(value)) : int64_t(0));
  if (name == "float")
    return Value::of(isNumber(value) ? asDouble(value) : 0.0);
  if (name == "abs" && isNumber(value))
    return value.kind == Value::Float ? Value::of(std::abs(value.number))
                                      : Value::of(std::abs(asInt(value)));
  if (name == "default" || name == "d") {
    bool boolean = args.size() > 1 && truthy(args[1]);
    if (value.kind == Value::Undefined || (boolean && !truthy(value)))
      return args.empty() ? Value::of(std::string()) : args[0];
    return value;
  }
  llvm::Expected<Values> items = iterate(value, line);
  if (!items)
    return items.takeError();
  if (name == "first" || name == "last") {
    if (items->empty())
      return Value();
    return name == "first" ? items->front() : items->back();
  }
  if (name == "list")
    return Value::of(*items);
  if (name == "reverse") {
    std::reverse(items->begin(), items->end());
    if (value.kind == Value::String) {
      std::string reversed;
      for (const Value &c : *items)
        reversed += c.string;
      return Value::of(reversed);
    }
    return Value::of(*items);
  }
  if (name == "join") {
    std::string separator = args.empty() ? "" : text(args[0]), out;
    for (auto [index, item] : llvm::enumerate(*items))
      out += (index ? separator : "") + text(item);
    return Value::of(out);
  }
  if (name == "items" && value.kind == Value::Dict) {
    Values pairs;
    for (auto &[key, item] : value.dict->items)
      pairs.push_back(Value::of(Values{Value::of(key), item}));
    return Value::of(std::move(pairs));
  }
  if (name == "map") {
    const Value *key = keyword("attribute");
    if (!key)
      return failAt(line, "map() takes attribute=...");
    Values mapped;
    for (const Value &item : *items) {
      llvm::Expected<Value> field = attributeOf(item, text(*key), line);
      if (!field)
        return field.takeError();
      mapped.push_back(*field);
    }
    return Value::of(std::move(mapped));
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (args.empty())
      return failAt(line, name + "() takes an attribute");
    Values kept;
    for (const Value &item : *items) {
      llvm::Expected<Value> field = attributeOf(item, text(args[0]), line);
      if (!field)
        return field.takeError();
      bool pass = truthy(*field);
      if (args.size() > 1) {
        llvm::Expected<bool> passed = applyTest(
            text(args[1]), *field, Values(args.begin() + 2, args.end()), line);
        if (!passed)
          return passed.takeError();
        pass = *passed;
      }
      if (pass == (name == "selectattr"))
        kept.push_back(item);
    }
    return Value::of(std::move(kept));
  }
  return failAt(line, "unsupported filter '" + name + "'");
}
