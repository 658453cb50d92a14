//===- JinjaValues.cpp - Python's values, as chat templates see them ------===//
//
// The variables read from JSON keeping each object's keys in order (as
// Python's dicts do), and Python's semantics of the values: truthiness,
// str() and repr(), ==, iteration, indexing by character; and
// transformers' tojson (json.dumps without ensure_ascii).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/Jinja.h"

#include "runtime/data/tokenizer/Unicode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace twill;
using namespace twill::jinja;

Value *Dict::find(llvm::StringRef key) {
  for (auto &[name, value] : items)
    if (name == key)
      return &value;
  return nullptr;
}

llvm::Error jinja::failAt(int line, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "line " + llvm::Twine(line) + ": " + what);
}

namespace {
/// Reads JSON into values keeping each object's keys in order (Python's
/// dicts do, and tojson writes them so).
class JsonReader {
public:
  explicit JsonReader(llvm::StringRef text) : text(text) {}

  llvm::Expected<Value> document() {
    llvm::Expected<Value> value = read(0);
    if (value && (skip(), at != text.size()))
      return fail("text after the value");
    return value;
  }

private:
  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the variables' JSON at byte " +
                                       llvm::Twine(at) + ": " + what);
  }
  void skip() {
    while (at < text.size() && llvm::isSpace(text[at]))
      ++at;
  }
  bool take(llvm::StringRef word) {
    if (!text.substr(at).starts_with(word))
      return false;
    at += word.size();
    return true;
  }
  unsigned hex4() {
    unsigned value = 0;
    if (at + 4 > text.size() || text.substr(at, 4).getAsInteger(16, value))
      value = 0xFFFD;
    at += 4;
    return value;
  }
  llvm::Expected<std::string> string() {
    std::string out;
    for (++at; at < text.size() && text[at] != '"';) {
      char c = text[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at == text.size())
        break;
      char escaped = text[at++];
      switch (escaped) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        uint32_t code = hex4();
        // A surrogate pair is one character.
        if (code >= 0xD800 && code < 0xDC00 && take("\\u")) {
          uint32_t low = hex4();
          code = low >= 0xDC00 && low < 0xE000
                     ? 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                     : 0xFFFD;
        } else if (code >= 0xD800 && code < 0xE000) {
          code = 0xFFFD;
        }
        unicode::append(code, out);
        break;
      }
      default:
        out += escaped; // " \\ /
      }
    }
    if (at >= text.size())
      return fail("a string is not closed");
    ++at;
    return out;
  }
  llvm::Expected<Value> read(int depth) {
    if (depth > 256)
      return fail("nested deeper than 256 levels");
    skip();
    if (at >= text.size())
      return fail("expected a value");
    char c = text[at];
    if (c == '"') {
      llvm::Expected<std::string> s = string();
      if (!s)
        return s.takeError();
      return Value::of(std::move(*s));
    }
    if (take("true"))
      return Value::of(true);
    if (take("false"))
      return Value::of(false);
    if (take("null"))
      return Value::none();
    if (c == '[' || c == '{') {
      bool object = c == '{';
      ++at;
      Value result = object ? Value::emptyDict() : Value::of(Values());
      skip();
      if (at < text.size() && text[at] == (object ? '}' : ']')) {
        ++at;
        return result;
      }
      while (true) {
        std::string key;
        if (object) {
          skip();
          if (at >= text.size() || text[at] != '"')
            return fail("expected a key");
          llvm::Expected<std::string> parsed = string();
          if (!parsed)
            return parsed.takeError();
          key = std::move(*parsed);
          skip();
          if (!take(":"))
            return fail("expected ':'");
        }
        llvm::Expected<Value> item = read(depth + 1);
        if (!item)
          return item;
        if (object) {
          if (Value *existing = result.dict->find(key))
            *existing = std::move(*item); // the last of a key, as Python's
          else
            result.dict->items.push_back({std::move(key), std::move(*item)});
        } else {
          result.list->push_back(std::move(*item));
        }
        skip();
        if (take(","))
          continue;
        if (take(object ? "}" : "]"))
          return result;
        return fail(object ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
    size_t end = at;
    while (end < text.size() &&
           llvm::StringRef("+-.eE0123456789").contains(text[end]))
      ++end;
    llvm::StringRef number = text.slice(at, end);
    at = end;
    int64_t integer;
    double real;
    if (!number.getAsInteger(10, integer))
      return Value::of(integer);
    if (!number.empty() && !number.getAsDouble(real))
      return Value::of(real);
    return fail("expected a value");
  }

  llvm::StringRef text;
  size_t at = 0;
};
} // namespace

llvm::Expected<Value> jinja::readJson(llvm::StringRef text) {
  return JsonReader(text).document();
}

bool jinja::truthy(const Value &value) {
  switch (value.kind) {
  case Value::Undefined:
  case Value::None:
    return false;
  case Value::Bool:
    return value.boolean;
  case Value::Int:
    return value.integer != 0;
  case Value::Float:
    return value.number != 0;
  case Value::String:
    return !value.string.empty();
  case Value::List:
    return !value.list->empty();
  case Value::Dict:
    return value.isNamespace || !value.dict->items.empty();
  case Value::Function:
    return true;
  }
  return false;
}

/// Python's repr of a float: the shortest digits that read back.
static std::string floatText(double value) {
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  if (std::isnan(value))
    return "nan";
  for (int digits = 1; digits <= 17; ++digits) {
    std::string text =
        llvm::formatv("{0}", llvm::format("%.*g", digits, value));
    if (std::strtod(text.c_str(), nullptr) == value) {
      if (text.find_first_of(".en") == std::string::npos)
        text += ".0";
      return text;
    }
  }
  return llvm::formatv("{0}", value).str();
}

/// Python's repr, of an item inside a list or dict printed.
static std::string repr(const Value &value) {
  if (value.kind != Value::String)
    return text(value);
  std::string out = "'";
  for (char c : value.string) {
    if (c == '\'' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "'";
}

/// Python's str() of a value, which {{ }} writes.
std::string jinja::text(const Value &value) {
  switch (value.kind) {
  case Value::Undefined:
    return "";
  case Value::None:
    return "None";
  case Value::Bool:
    return value.boolean ? "True" : "False";
  case Value::Int:
    return std::to_string(value.integer);
  case Value::Float:
    return floatText(value.number);
  case Value::String:
    return value.string;
  case Value::List: {
    std::string out = "[";
    for (auto [index, item] : llvm::enumerate(*value.list))
      out += (index ? ", " : "") + repr(item);
    return out + "]";
  }
  case Value::Dict: {
    if (value.isNamespace)
      return "<Namespace>";
    std::string out = "{";
    for (auto [index, item] : llvm::enumerate(value.dict->items))
      out += (index ? ", " : "") + repr(Value::of(item.first)) + ": " +
             repr(item.second);
    return out + "}";
  }
  case Value::Function:
    return "<function>";
  }
  return "";
}

/// json.dumps(value, ensure_ascii=False, indent=indent): transformers'
/// tojson.
void jinja::toJson(const Value &value, std::optional<int64_t> indent, int depth,
                   std::string &out) {
  auto newline = [&](int level) {
    if (indent) {
      out += '\n';
      out.append(size_t(*indent * level), ' ');
    }
  };
  switch (value.kind) {
  case Value::Undefined:
  case Value::None:
  case Value::Function:
    out += "null";
    return;
  case Value::Bool:
    out += value.boolean ? "true" : "false";
    return;
  case Value::Int:
  case Value::Float:
    out += text(value);
    return;
  case Value::String:
    out += '"';
    for (char c : value.string) {
      switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if ((unsigned char)c < 0x20)
          out += llvm::formatv("\\u{0:x-4}", unsigned(c)).str();
        else
          out += c;
      }
    }
    out += '"';
    return;
  case Value::List:
    if (value.list->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (auto [index, item] : llvm::enumerate(*value.list)) {
      if (index)
        out += indent ? "," : ", ";
      newline(depth + 1);
      toJson(item, indent, depth + 1, out);
    }
    newline(depth);
    out += ']';
    return;
  case Value::Dict:
    if (value.dict->items.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (auto [index, item] : llvm::enumerate(value.dict->items)) {
      if (index)
        out += indent ? "," : ", ";
      newline(depth + 1);
      toJson(Value::of(item.first), indent, depth + 1, out);
      out += ": ";
      toJson(item.second, indent, depth + 1, out);
    }
    newline(depth);
    out += '}';
    return;
  }
}

bool jinja::isNumber(const Value &value) {
  return value.kind == Value::Int || value.kind == Value::Float ||
         value.kind == Value::Bool;
}
double jinja::asDouble(const Value &value) {
  return value.kind == Value::Float  ? value.number
         : value.kind == Value::Bool ? double(value.boolean)
                                     : double(value.integer);
}
int64_t jinja::asInt(const Value &value) {
  return value.kind == Value::Bool ? int64_t(value.boolean) : value.integer;
}

bool jinja::equal(const Value &a, const Value &b) {
  if (isNumber(a) && isNumber(b))
    return asDouble(a) == asDouble(b);
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Value::String:
    return a.string == b.string;
  case Value::List:
    return a.list->size() == b.list->size() &&
           llvm::all_of(llvm::zip_equal(*a.list, *b.list), [](auto pair) {
             return equal(std::get<0>(pair), std::get<1>(pair));
           });
  case Value::Dict:
    if (a.dict == b.dict)
      return true;
    if (a.dict->items.size() != b.dict->items.size())
      return false;
    for (auto &[key, item] : a.dict->items) {
      Value *other = b.dict->find(key);
      if (!other || !equal(item, *other))
        return false;
    }
    return true;
  case Value::Function:
    return a.function == b.function;
  default:
    return true; // undefined, none
  }
}

/// The items a for loop walks: a list's, a dict's keys, a string's
/// characters; nothing of Undefined.
llvm::Expected<Values> jinja::iterate(const Value &value, int line) {
  switch (value.kind) {
  case Value::Undefined:
    return Values();
  case Value::List:
    return *value.list;
  case Value::Dict: {
    Values keys;
    for (auto &item : value.dict->items)
      keys.push_back(Value::of(item.first));
    return keys;
  }
  case Value::String: {
    Values chars;
    for (std::string &c : characters(value.string))
      chars.push_back(Value::of(std::move(c)));
    return chars;
  }
  default:
    return failAt(line, "'" + text(value) + "' is not iterable");
  }
}

/// Python's index `index` into `size` items (negative from the end);
/// none when out of range.
std::optional<size_t> jinja::pythonIndex(int64_t index, size_t size) {
  if (index < 0)
    index += int64_t(size);
  if (index < 0 || index >= int64_t(size))
    return std::nullopt;
  return size_t(index);
}

/// The characters of a string, for slicing and indexing by character.
std::vector<std::string> jinja::characters(llvm::StringRef s) {
  std::vector<std::string> chars;
  for (size_t at = 0; at < s.size();) {
    unsigned length = unicode::charLength(s, at);
    chars.push_back(s.substr(at, length).str());
    at += length;
  }
  return chars;
}
