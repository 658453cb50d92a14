//===- JinjaLibrary.cpp - what chat templates call ------------------------===//
//
// Jinja's tests and filters that chat templates use, Python's string and
// dict methods, and the globals transformers gives a template
// (raise_exception, namespace, range, strftime_now); what each makes is
// bounded as it is made (Jinja.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/Jinja.h"

#include "runtime/data/tokenizer/Unicode.h"

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
    "trim",   "tojson", "length",     "count",      "upper",    "lower",
    "string", "safe",   "int",        "float",      "abs",      "default",
    "d",      "first",  "last",       "list",       "reverse",  "join",
    "items",  "map",    "selectattr", "rejectattr", "dictsort", "indent"};

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

Namespaces::~Namespaces() {
  for (const std::shared_ptr<Dict> &space : made)
    space->items.clear();
}

llvm::Expected<Value> Namespaces::make(const Keywords &attributes, int line) {
  Value space = Value::make(Value::Dict);
  space.dict = std::make_shared<Dict>();
  space.isNamespace = true;
  if (llvm::Error error = checkSize(held + sizeof(Dict), line))
    return std::move(error);
  held += sizeof(Dict);
  made.push_back(space.dict);
  for (const auto &[name, value] : attributes)
    if (llvm::Error error = set(space, name, value, line))
      return std::move(error);
  return space;
}

llvm::Error Namespaces::set(const Value &space, const std::string &name,
                            Value value, int line) {
  Value *existing = space.dict->find(name);
  uint64_t after = held + sizeOf(value);
  if (existing)
    after -= sizeOf(*existing);
  else
    after += sizeof(std::pair<std::string, Value>) + name.size();
  if (llvm::Error error = checkSize(after, line))
    return error;
  held = after;
  if (existing)
    *existing = std::move(value);
  else
    space.dict->items.push_back({name, std::move(value)});
  return llvm::Error::success();
}

/// range(stop), range(start, stop[, step]): its length found first, as
/// Python's (so that no step overflows), and bounded as transformers'
/// sandbox bounds it.
static llvm::Expected<Value> range(const Values &args, int line) {
  if (args.empty() || args.size() > 3)
    return failAt(line, llvm::Twine("range expected ") +
                            (args.empty() ? "at least 1 argument, got 0"
                                          : "at most 3 arguments, got " +
                                                std::to_string(args.size())));
  int64_t bounds[3] = {0, 0, 1};
  for (auto [index, arg] : llvm::enumerate(args)) {
    llvm::Expected<int64_t> bound = integerOf(arg, line);
    if (!bound)
      return bound.takeError();
    bounds[args.size() == 1 ? 1 : index] = *bound;
  }
  auto [start, stop, step] = bounds;
  if (step == 0)
    return failAt(line, "range() arg 3 must not be zero");
  uint64_t count = rangeLength(start, stop, step);
  if (count > kMaxRange)
    return failAt(line, "Range too big. The sandbox blocks ranges larger "
                        "than MAX_RANGE (" +
                            llvm::Twine(kMaxRange) + ").");
  ItemsBuilder items(Value::List, line);
  for (uint64_t i = 0; i < count; ++i)
    if (llvm::Error error = items.append(
            Value::of(int64_t(uint64_t(start) + i * uint64_t(step)))))
      return std::move(error);
  return items.take();
}

/// datetime.now().strftime(format), whole however long.
static llvm::Expected<Value> strftimeNow(const Values &args, int line) {
  // strftime writes nothing both when its buffer is short and when the text
  // is empty: a space after the format tells them apart (and is dropped).
  std::string format = (args.empty() ? "" : text(args[0])) + " ";
  std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  for (size_t capacity = 256;; capacity *= 2) {
    std::string buffer(capacity, '\0');
    if (size_t written =
            std::strftime(buffer.data(), capacity, format.c_str(), &local)) {
      buffer.resize(written - 1);
      if (llvm::Error error = checkSize(buffer.size(), line))
        return std::move(error);
      return Value::of(std::move(buffer));
    }
    // The text did not fit a buffer past the bound: it passes the bound.
    if (llvm::Error error = checkSize(capacity, line))
      return std::move(error);
  }
}

void jinja::defineGlobals(llvm::StringMap<Value> &globals,
                          Namespaces &namespaces) {
  globals["raise_exception"] = Value::of(
      Function([](Values &args, Keywords &, int line) -> llvm::Expected<Value> {
        return failAt(line, "the template raised an exception: " +
                                (args.empty() ? std::string() : text(args[0])));
      }));
  globals["namespace"] =
      Value::of(Function([&namespaces](Values &, Keywords &keywords, int line) {
        return namespaces.make(keywords, line);
      }));
  globals["range"] = Value::of(Function(
      [](Values &args, Keywords &, int line) { return range(args, line); }));
  globals["strftime_now"] =
      Value::of(Function([](Values &args, Keywords &, int line) {
        return strftimeNow(args, line);
      }));
}

/// Python's str.split(separator, most): the parts, each bounded as it is
/// made (a string's parts take far more memory than it does).
static llvm::Expected<Value> split(llvm::StringRef s, const Value *separator,
                                   int64_t most, int line) {
  ItemsBuilder parts(Value::List, line);
  // Past `most` splits (none below 0), the rest is one part.
  auto add = [&](llvm::StringRef part) {
    most -= most > 0;
    return parts.append(Value::of(part.str()));
  };
  if (!separator || separator->kind == Value::None) {
    // Runs of whitespace, none kept at either end (the rest keeps its own).
    while (!(s = s.ltrim()).empty()) {
      size_t end = most == 0 ? s.size() : s.find_first_of(" \t\n\v\f\r");
      if (llvm::Error error = add(s.take_front(end)))
        return std::move(error);
      s = s.drop_front(std::min(end, s.size()));
    }
    return parts.take();
  }
  // As Python's str.split, which refuses these (an empty separator would
  // never end here).
  if (separator->kind != Value::String)
    return failAt(line, "split() takes a string or none as its separator");
  if (separator->string.empty())
    return failAt(line, "split(): empty separator");
  while (true) {
    size_t at = most == 0 ? llvm::StringRef::npos : s.find(separator->string);
    if (llvm::Error error = add(s.take_front(at)))
      return std::move(error);
    if (at == llvm::StringRef::npos)
      return parts.take();
    s = s.drop_front(at + separator->string.size());
  }
}

/// Python's str.replace(from, to, most).
static llvm::Expected<Value> replace(llvm::StringRef s, const Values &args,
                                     int line) {
  if (args.size() < 2)
    return failAt(line, "replace() takes 2 arguments");
  std::string from = text(args[0]), to = text(args[1]);
  int64_t most = -1;
  if (args.size() > 2) {
    llvm::Expected<int64_t> given = integerOf(args[2], line);
    if (!given)
      return given.takeError();
    most = *given;
  }
  TextBuilder out(line);
  auto insert = [&] { // `to` once more, of the `most`
    most -= most > 0;
    return out.append(to);
  };
  if (from.empty()) { // Python's: `to` before each character, and at the end
    for (size_t at = 0;;) {
      if (most != 0) {
        if (llvm::Error error = insert())
          return std::move(error);
      }
      if (at >= s.size())
        return Value::of(out.take());
      unsigned length = unicode::charLength(s, at);
      if (llvm::Error error = out.append(s.substr(at, length)))
        return std::move(error);
      at += length;
    }
  }
  for (size_t at; most != 0 && (at = s.find(from)) != llvm::StringRef::npos;
       s = s.drop_front(at + from.size())) {
    if (llvm::Error error = out.append(s.take_front(at)))
      return std::move(error);
    if (llvm::Error error = insert())
      return std::move(error);
  }
  if (llvm::Error error = out.append(s))
    return std::move(error);
  return Value::of(out.take());
}

/// The items of `iterable` joined by `separator` (str.join, |join).
static llvm::Expected<Value> joined(const Value &iterable,
                                    llvm::StringRef separator, int line) {
  llvm::Expected<Value> items = iterate(iterable, line);
  if (!items)
    return items.takeError();
  TextBuilder out(line);
  for (auto [index, item] : llvm::enumerate(*items->list)) {
    if (llvm::Error error = out.append(index ? separator : ""))
      return std::move(error);
    if (llvm::Error error = out.append(text(item)))
      return std::move(error);
  }
  return Value::of(out.take());
}

/// `method`, bound to `object`: it holds the object, so counts as it does.
static Value bound(const Value &object, Function method) {
  Value value = Value::of(std::move(method));
  value.size = sizeOf(object);
  value.nesting = object.nesting + 1;
  return value;
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
    return bound(
        object,
        [s, methodName](Values &args, Keywords &,
                        int line) -> llvm::Expected<Value> {
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
            llvm::Expected<int64_t> most =
                args.size() > 1 ? integerOf(args[1], line) : int64_t(-1);
            if (!most)
              return most.takeError();
            return split(s, first, *most, line);
          }
          if (methodName == "upper")
            return Value::of(llvm::StringRef(s).upper());
          if (methodName == "lower")
            return Value::of(llvm::StringRef(s).lower());
          if (methodName == "replace")
            return replace(s, args, line);
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
          return joined(first ? *first : Value(), s, line);
        });
  }
  if (object.kind == Value::Dict && !object.isNamespace) {
    static const char *known[] = {"items", "keys", "values", "get"};
    if (!llvm::is_contained(known, name))
      return unsupported();
    Value dict = object;
    return bound(
        object,
        [dict, methodName](Values &args, Keywords &,
                           int line) -> llvm::Expected<Value> {
          if (methodName == "get") {
            Value *found =
                args.empty() ? nullptr : dict.dict->find(text(args[0]));
            return found ? *found : (args.size() > 1 ? args[1] : Value::none());
          }
          if (methodName == "items")
            return applyFilter("items", dict, {}, {}, line);
          ItemsBuilder items(Value::List, line);
          for (auto &[key, value] : dict.dict->items)
            if (llvm::Error error =
                    items.append(methodName == "keys" ? Value::of(key) : value))
              return std::move(error);
          return items.take();
        });
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
    return isNumber(value) && // -1 divides all (and % of it may overflow)
           (asInt(args[0]) == -1 || asInt(value) % asInt(args[0]) == 0);
  return failAt(line, "unsupported test '" + name + "'");
}

/// Python's str.splitlines: the lines of `s` without their ends (\n,
/// \r\n, \r, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029).
static std::vector<std::string> splitLines(llvm::StringRef s) {
  static const llvm::StringRef ends[] = {
      "\r\n", "\n",   "\r",       "\v",           "\f",          "\x1c",
      "\x1d", "\x1e", "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9"};
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t at = 0; at < s.size();) {
    llvm::StringRef rest = s.substr(at);
    auto end = llvm::find_if(
        ends, [&](llvm::StringRef e) { return rest.starts_with(e); });
    if (end == std::end(ends)) {
      ++at;
      continue;
    }
    lines.push_back(s.slice(start, at).str());
    at += end->size();
    start = at;
  }
  if (start < s.size())
    lines.push_back(s.substr(start).str());
  return lines;
}

/// Jinja's indent(width=4, first=False, blank=False): every line but the
/// first (and it too, with `first`) behind `width` spaces, or the string
/// `width`; blank lines too only with `blank`.
static llvm::Expected<Value> indented(const Value &value, const Value &width,
                                      bool first, bool blank, int line) {
  std::string indent;
  if (width.kind == Value::String) {
    indent = width.string;
  } else {
    llvm::Expected<int64_t> spaces = integerOf(width, line);
    if (!spaces)
      return spaces.takeError();
    if (llvm::Error error = checkSize(std::max<int64_t>(*spaces, 0), line))
      return std::move(error);
    indent.assign(std::max<int64_t>(*spaces, 0), ' ');
  }
  // As Jinja: a newline added first, for splitlines to keep a last one.
  std::vector<std::string> lines = splitLines(text(value) + "\n");
  TextBuilder out(line);
  for (auto [index, each] : llvm::enumerate(lines)) {
    if (index)
      if (llvm::Error error = out.append("\n"))
        return std::move(error);
    bool prefixed = index ? blank || !each.empty() : first;
    if (prefixed)
      if (llvm::Error error = out.append(indent))
        return std::move(error);
    if (llvm::Error error = out.append(each))
      return std::move(error);
  }
  return Value::of(out.take());
}

/// A dict's items as Python lists them: a list of [key, value] pairs.
static llvm::Expected<Value>
keyValuePairs(const std::vector<std::pair<std::string, Value>> &items,
              int line) {
  ItemsBuilder pairs(Value::List, line);
  for (auto &[key, item] : items) {
    ItemsBuilder pair(Value::List, line);
    if (llvm::Error error = pair.append({Value::of(key), item}))
      return std::move(error);
    if (llvm::Error error = pairs.append(pair.take()))
      return std::move(error);
  }
  return pairs.take();
}

/// Jinja's dictsort(case_sensitive=False, by='key', reverse=False): a
/// dict's [key, value] pairs sorted by key or value (strings without case
/// unless asked), stably, as Python's sorted.
static llvm::Expected<Value> dictSorted(const Value &value, bool caseSensitive,
                                        bool byValue, bool reverse, int line) {
  if (value.kind != Value::Dict)
    return failAt(line, "dictsort sorts a dict, not a " + typeName(value));
  std::vector<std::pair<std::string, Value>> items = value.dict->items;
  auto sortKey = [&](const std::pair<std::string, Value> &item) {
    Value key = byValue ? item.second : Value::of(item.first);
    if (!caseSensitive && key.kind == Value::String)
      key.string = llvm::StringRef(key.string).lower();
    return key;
  };
  std::optional<std::string> incomparable;
  llvm::stable_sort(items, [&](const auto &a, const auto &b) {
    Value x = sortKey(reverse ? b : a), y = sortKey(reverse ? a : b);
    if (isNumber(x) && isNumber(y))
      return asDouble(x) < asDouble(y);
    if (x.kind == Value::String && y.kind == Value::String)
      return x.string < y.string;
    incomparable = typeName(x) + "' and '" + typeName(y);
    return false;
  });
  if (incomparable)
    return failAt(line, "'<' not supported between instances of '" +
                            *incomparable + "'");
  return keyValuePairs(items, line);
}

/// trim, upper, lower, string and safe: of the value's text.
static llvm::Expected<Value> textFilter(llvm::StringRef name,
                                        const Value &value, int line) {
  // A list's or dict's str() is larger than it (quotes, escapes): bounded
  // as any string made.
  std::string str = text(value);
  if (llvm::Error error = checkSize(str.size(), line))
    return std::move(error);
  if (name == "trim")
    return Value::of(stripped(str, nullptr, true, true));
  if (name == "upper" || name == "lower")
    return Value::of(name == "upper" ? llvm::StringRef(str).upper()
                                     : llvm::StringRef(str).lower());
  return Value::of(std::move(str));
}

/// length (count): of a string's characters, a list's or a dict's items.
static llvm::Expected<Value> lengthOf(const Value &value, int line) {
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

/// map, selectattr, rejectattr and reverse over a sequence's items; none
/// for another name.
static std::optional<llvm::Expected<Value>>
itemsFilter(llvm::StringRef name, const Values &items, const Values &args,
            const Value *attribute, int line) {
  ItemsBuilder made(Value::List, line);
  if (name == "reverse") {
    if (llvm::Error error = made.append(Values(items.rbegin(), items.rend())))
      return std::move(error);
    return made.take();
  }
  if (name == "map") {
    if (!attribute)
      return failAt(line, "map() takes attribute=...");
    for (const Value &item : items) {
      llvm::Expected<Value> field = attributeOf(item, text(*attribute), line);
      if (!field)
        return field.takeError();
      if (llvm::Error error = made.append(*field))
        return std::move(error);
    }
    return made.take();
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (args.empty())
      return failAt(line, name + "() takes an attribute");
    for (const Value &item : items) {
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
      if (pass != (name == "selectattr"))
        continue;
      if (llvm::Error error = made.append(item))
        return std::move(error);
    }
    return made.take();
  }
  return std::nullopt;
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
  // A parameter given by place or by name, else its default.
  auto parameter = [&](size_t index, llvm::StringRef key,
                       Value fallback) -> Value {
    if (index < args.size())
      return args[index];
    const Value *given = keyword(key);
    return given ? *given : fallback;
  };
  if (name == "indent")
    return indented(value, parameter(0, "width", Value::of(int64_t(4))),
                    truthy(parameter(1, "first", Value::of(false))),
                    truthy(parameter(2, "blank", Value::of(false))), line);
  if (name == "dictsort")
    return dictSorted(
        value, truthy(parameter(0, "case_sensitive", Value::of(false))),
        text(parameter(1, "by", Value::of(std::string("key")))) == "value",
        truthy(parameter(2, "reverse", Value::of(false))), line);
  if (name == "tojson") {
    const Value *indent = keyword("indent");
    llvm::Expected<std::string> json =
        toJson(value, indent ? *indent : Value(), line);
    if (!json)
      return json.takeError();
    return Value::of(std::move(*json));
  }
  if (name == "trim" || name == "upper" || name == "lower" ||
      name == "string" || name == "safe")
    return textFilter(name, value, line);
  if (name == "length" || name == "count")
    return lengthOf(value, line);
  // Jinja's int of a float past 64 bits is Python's unbounded int: refused,
  // not wrapped around; of nan, its default 0.
  if (name == "int" && value.kind == Value::Float) {
    if (std::isnan(value.number))
      return Value::of(int64_t(0));
    if (!(std::abs(value.number) < 0x1p63))
      return failAt(line, "an integer past 64 bits");
    return Value::of(int64_t(value.number));
  }
  if (name == "int")
    return Value::of(isNumber(value) ? asInt(value) : int64_t(0));
  if (name == "float")
    return Value::of(isNumber(value) ? asDouble(value) : 0.0);
  if (name == "abs" && value.kind == Value::Float)
    return Value::of(std::abs(value.number));
  if (name == "abs" && isNumber(value)) {
    if (asInt(value) == INT64_MIN)
      return failAt(line, "an integer past 64 bits");
    return Value::of(std::abs(asInt(value)));
  }
  if (name == "default" || name == "d") {
    bool boolean = args.size() > 1 && truthy(args[1]);
    if (value.kind == Value::Undefined || (boolean && !truthy(value)))
      return args.empty() ? Value::of(std::string()) : args[0];
    return value;
  }
  if (name == "items" && value.kind == Value::Dict)
    return keyValuePairs(value.dict->items, line);
  if (name == "join")
    return joined(value, args.empty() ? "" : text(args[0]), line);
  // A string's first, last or reversed characters, without a list of them
  // (which takes far more memory than the string).
  if (value.kind == Value::String &&
      (name == "first" || name == "last" || name == "reverse")) {
    std::vector<std::string> chars = characters(value.string);
    if (name == "reverse")
      return Value::of(llvm::join(llvm::reverse(chars), ""));
    if (chars.empty())
      return Value();
    return Value::of(name == "first" ? chars.front() : chars.back());
  }
  llvm::Expected<Value> iterated = iterate(value, line);
  if (!iterated)
    return iterated.takeError();
  const Values &items = *iterated->list;
  if (name == "list")
    return iterated;
  if (name == "first" || name == "last") {
    if (items.empty())
      return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (std::optional<llvm::Expected<Value>> filtered =
          itemsFilter(name, items, args, keyword("attribute"), line))
    return std::move(*filtered);
  return failAt(line, "unsupported filter '" + name + "'");
}
