//===- JinjaValues.cpp - Python's values, as chat templates see them ------===//
//
// The variables read from JSON keeping each object's keys in order (as
// Python's dicts do), and Python's semantics of the values: truthiness,
// str() and repr(), ==, iteration, indexing by character; and
// transformers' tojson (json.dumps without ensure_ascii). Strings, lists
// and dicts are made here, in TextBuilder and ItemsBuilder, each within
// the bound on what a template makes.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/Jinja.h"

#include "runtime/data/tokenizer/Unicode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace twill;
using namespace twill::jinja;

Value *Dict::find(llvm::StringRef key) {
  for (auto &[name, value] : items)
    if (name == key)
      return &value;
  return nullptr;
}

llvm::Error jinja::failAt(int line, const llvm::Twine &what) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      line ? "line " + llvm::Twine(line) + ": " + what : what);
}

uint64_t jinja::sizeOf(const Value &value) {
  return value.kind == Value::String ? value.string.size() : value.size;
}

llvm::Error jinja::checkSize(uint64_t size, int line) {
  if (size <= kMaxSize)
    return llvm::Error::success();
  return failAt(line, "more than " + llvm::Twine(kMaxSize >> 20) +
                          " MiB in one string, list or dict: the bound on "
                          "what a template makes");
}

/// `size` with `times` pieces of `each` more, saturated rather than
/// wrapped (checkSize refuses it either way).
static uint64_t grown(uint64_t size, uint64_t each, uint64_t times) {
  uint64_t more;
  if (__builtin_mul_overflow(each, times, &more) ||
      __builtin_add_overflow(size, more, &size))
    return UINT64_MAX;
  return size;
}

llvm::Error TextBuilder::append(llvm::StringRef piece, uint64_t times) {
  if (piece.empty() || times == 0)
    return llvm::Error::success();
  if (llvm::Error error =
          checkSize(grown(text.size(), piece.size(), times), line))
    return error;
  for (uint64_t i = 0; i < times; ++i)
    text += piece;
  return llvm::Error::success();
}

ItemsBuilder::ItemsBuilder(Value::Kind kind, int line)
    : value(Value::make(kind)), line(line) {
  if (kind == Value::List)
    value.list = std::make_shared<Values>();
  else
    value.dict = std::make_shared<jinja::Dict>();
}

llvm::Error ItemsBuilder::grow(uint64_t each, uint64_t times, int nesting) {
  if (nesting >= kMaxNesting)
    return failAt(line, "lists or dicts nested deeper than " +
                            llvm::Twine(kMaxNesting) + " levels");
  uint64_t size = grown(value.size, each, times);
  if (llvm::Error error = checkSize(size, line))
    return error;
  value.size = size;
  value.nesting = std::max(value.nesting, nesting + 1);
  return llvm::Error::success();
}

llvm::Error ItemsBuilder::append(llvm::ArrayRef<Value> items, uint64_t times) {
  if (items.empty() || times == 0)
    return llvm::Error::success();
  uint64_t each = 0;
  int nesting = 0;
  for (const Value &item : items) {
    each += sizeof(Value) + sizeOf(item);
    nesting = std::max(nesting, item.nesting);
  }
  if (llvm::Error error = grow(each, times, nesting))
    return error;
  for (uint64_t i = 0; i < times; ++i)
    value.list->insert(value.list->end(), items.begin(), items.end());
  return llvm::Error::success();
}

llvm::Error ItemsBuilder::add(std::string key, Value item) {
  Value *existing = value.dict->find(key);
  uint64_t each =
      sizeOf(item) +
      (existing ? 0 : sizeof(std::pair<std::string, Value>) + key.size());
  if (existing)
    value.size -= sizeOf(*existing);
  if (llvm::Error error = grow(each, 1, item.nesting))
    return error;
  if (existing)
    *existing = std::move(item);
  else
    value.dict->items.push_back({std::move(key), std::move(item)});
  return llvm::Error::success();
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
      ItemsBuilder result(object ? Value::Dict : Value::List, 0);
      skip();
      if (at < text.size() && text[at] == (object ? '}' : ']')) {
        ++at;
        return result.take();
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
        if (llvm::Error error = object ? result.add(std::move(key), *item)
                                       : result.append(*item))
          return fail(llvm::toString(std::move(error)));
        skip();
        if (take(","))
          continue;
        if (take(object ? "}" : "]"))
          return result.take();
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

/// Python's repr of a float (float_repr_style 'short'): the fewest digits
/// that read back, fixed where the decimal point falls 4 places left of
/// the first digit to 16 right of it (50.0, 1000000.0, 0.0001), else as
/// d.ddde+XX with at least two exponent digits (1e+16, 1e-05).
static std::string floatText(double value) {
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  if (std::isnan(value))
    return "nan";
  std::string sign = std::signbit(value) ? "-" : "";
  value = std::fabs(value);
  if (value == 0)
    return sign + "0.0";
  // The shortest mantissa that reads back: its digits and exponent.
  std::string digits;
  int exponent = 0;
  for (int precision = 0; precision <= 16; ++precision) {
    char scientific[40];
    std::snprintf(scientific, sizeof scientific, "%.*e", precision, value);
    if (std::strtod(scientific, nullptr) != value && precision < 16)
      continue;
    llvm::StringRef text(scientific);
    auto [mantissa, power] = text.split('e');
    digits = mantissa.str();
    llvm::erase(digits, '.');
    power.consume_front("+");
    power.getAsInteger(10, exponent);
    break;
  }
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  int point = exponent + 1; // digits before the decimal point
  int length = int(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0)
      return sign + "0." + std::string(-point, '0') + digits;
    if (point >= length)
      return sign + digits + std::string(point - length, '0') + ".0";
    return sign + digits.substr(0, point) + "." + digits.substr(point);
  }
  std::string mantissa =
      digits.substr(0, 1) + (length > 1 ? "." + digits.substr(1) : "");
  return llvm::formatv("{0}{1}e{2}{3}", sign, mantissa,
                       exponent < 0 ? "-" : "+",
                       llvm::format("%02d", std::abs(exponent)))
      .str();
}

/// Python's repr, of an item inside a list or dict printed.
static std::string repr(const Value &value) {
  if (value.kind == Value::Undefined) // Jinja's Undefined's repr
    return "Undefined";
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

/// json.dumps's escape of `c` in a string; empty where it is written as is.
static std::string jsonEscape(char c) {
  switch (c) {
  case '"':
    return "\\\"";
  case '\\':
    return "\\\\";
  case '\n':
    return "\\n";
  case '\r':
    return "\\r";
  case '\t':
    return "\\t";
  case '\b':
    return "\\b";
  case '\f':
    return "\\f";
  default:
    if ((unsigned char)c < 0x20)
      return llvm::formatv("\\u{0:x-4}", unsigned(c)).str();
    return "";
  }
}

namespace {
/// json.dumps(value, ensure_ascii=False, indent=...), written within the
/// bound on a string: an indent repeats once per level on every line, so
/// that a wide one, or deep nesting, makes text far past the value's size.
class JsonWriter {
public:
  JsonWriter(std::optional<std::string> indent, int line)
      : out(line), indent(std::move(indent)), line(line) {}

  llvm::Error write(const Value &value, uint64_t level) {
    switch (value.kind) {
    case Value::Undefined:
    case Value::None:
    case Value::Function:
      return out.append("null");
    case Value::Bool:
      return out.append(value.boolean ? "true" : "false");
    case Value::Int:
    case Value::Float:
      return out.append(text(value));
    case Value::String:
      return string(value.string);
    case Value::List:
    case Value::Dict:
      break;
    }
    // As Python's json, which knows no namespace (nor so follows one that
    // holds itself).
    if (value.isNamespace)
      return failAt(line, "Object of type " + typeName(value) +
                              " is not JSON serializable");
    bool isList = value.kind == Value::List;
    size_t count = isList ? value.list->size() : value.dict->items.size();
    if (llvm::Error error = out.append(isList ? "[" : "{"))
      return error;
    for (size_t index = 0; index < count; ++index) {
      if (index) {
        if (llvm::Error error = out.append(indent ? "," : ", "))
          return error;
      }
      if (llvm::Error error = newline(level + 1))
        return error;
      if (isList) {
        if (llvm::Error error = write((*value.list)[index], level + 1))
          return error;
        continue;
      }
      const auto &[key, item] = value.dict->items[index];
      if (llvm::Error error = string(key))
        return error;
      if (llvm::Error error = out.append(": "))
        return error;
      if (llvm::Error error = write(item, level + 1))
        return error;
    }
    if (count) {
      if (llvm::Error error = newline(level))
        return error;
    }
    return out.append(isList ? "]" : "}");
  }

  TextBuilder out;

private:
  llvm::Error newline(uint64_t level) {
    if (!indent)
      return llvm::Error::success();
    if (llvm::Error error = out.append("\n"))
      return error;
    return out.append(*indent, level);
  }
  /// `s` quoted: runs of characters written as they are, whole.
  llvm::Error string(llvm::StringRef s) {
    if (llvm::Error error = out.append("\""))
      return error;
    size_t from = 0;
    for (size_t at = 0; at < s.size(); ++at) {
      std::string escape = jsonEscape(s[at]);
      if (escape.empty())
        continue;
      if (llvm::Error error = out.append(s.slice(from, at)))
        return error;
      if (llvm::Error error = out.append(escape))
        return error;
      from = at + 1;
    }
    if (llvm::Error error = out.append(s.drop_front(from)))
      return error;
    return out.append("\"");
  }

  std::optional<std::string> indent;
  int line;
};
} // namespace

/// json.dumps(value, ensure_ascii=False, indent=indent): transformers'
/// tojson.
llvm::Expected<std::string> jinja::toJson(const Value &value,
                                          const Value &indent, int line) {
  // As json.dumps: a string indents by itself, an int by that many spaces.
  std::optional<std::string> unit;
  if (indent.kind == Value::String) {
    unit = indent.string;
  } else if (indent.kind != Value::None && indent.kind != Value::Undefined) {
    llvm::Expected<uint64_t> spaces = timesOf(indent, line);
    if (!spaces)
      return spaces.takeError();
    TextBuilder made(line);
    if (llvm::Error error = made.append(" ", *spaces))
      return std::move(error);
    unit = made.take();
  }
  JsonWriter writer(std::move(unit), line);
  if (llvm::Error error = writer.write(value, 0))
    return std::move(error);
  return writer.out.take();
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

std::string jinja::typeName(const Value &value) {
  switch (value.kind) {
  case Value::Undefined:
    return "Undefined";
  case Value::None:
    return "NoneType";
  case Value::Bool:
    return "bool";
  case Value::Int:
    return "int";
  case Value::Float:
    return "float";
  case Value::String:
    return "str";
  case Value::List:
    return "list";
  case Value::Dict:
    return value.isNamespace ? "TemplateNamespace" : "dict"; // transformers'
  case Value::Function:
    return "function";
  }
  return "";
}

llvm::Expected<int64_t> jinja::integerOf(const Value &value, int line) {
  if (value.kind == Value::Int || value.kind == Value::Bool)
    return asInt(value);
  return failAt(line, "'" + typeName(value) +
                          "' object cannot be interpreted as an integer");
}

llvm::Expected<uint64_t> jinja::timesOf(const Value &count, int line) {
  if (count.kind != Value::Int && count.kind != Value::Bool)
    return failAt(line, "can't multiply sequence by non-int of type '" +
                            typeName(count) + "'");
  return uint64_t(std::max<int64_t>(asInt(count), 0));
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
    // A namespace is equal to itself alone, as Python's objects are (nor is
    // one that holds itself followed).
    if (a.dict == b.dict || a.isNamespace || b.isNamespace)
      return a.dict == b.dict;
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
/// characters (each bounded as it is made: a string's are far larger than
/// it); none of Undefined.
llvm::Expected<Value> jinja::iterate(const Value &value, int line) {
  if (value.kind == Value::List)
    return value;
  ItemsBuilder items(Value::List, line);
  if (value.kind == Value::Dict) {
    for (auto &item : value.dict->items)
      if (llvm::Error error = items.append(Value::of(item.first)))
        return std::move(error);
  } else if (value.kind == Value::String) {
    llvm::StringRef s = value.string;
    for (size_t at = 0; at < s.size();) {
      unsigned length = unicode::charLength(s, at);
      if (llvm::Error error =
              items.append(Value::of(s.substr(at, length).str())))
        return std::move(error);
      at += length;
    }
  } else if (value.kind != Value::Undefined) {
    return failAt(line, "'" + text(value) + "' is not iterable");
  }
  return items.take();
}

uint64_t jinja::rangeLength(int64_t start, int64_t stop, int64_t step) {
  if (step > 0 && start < stop)
    return (uint64_t(stop) - uint64_t(start) - 1) / uint64_t(step) + 1;
  if (step < 0 && start > stop)
    return (uint64_t(start) - uint64_t(stop) - 1) / (0 - uint64_t(step)) + 1;
  return 0;
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
