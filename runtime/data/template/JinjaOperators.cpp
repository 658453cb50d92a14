//===- JinjaOperators.cpp - Python's operators over a template's values ---===//
//
// What a template's binary operators give (but `and` and `or`, which the
// renderer short-circuits), as Python's: ==, ~ and + of strings and lists,
// in, comparisons, repetition sized before it is made, and arithmetic that
// refuses an int past 64 bits and a division by zero.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/Jinja.h"

#include <algorithm>
#include <cmath>

using namespace twill;
using namespace twill::jinja;

llvm::Expected<Value> jinja::applyBinary(llvm::StringRef op, const Value &a,
                                         const Value &b, int line) {
  if (op == "==" || op == "!=")
    return Value::of(equal(a, b) == (op == "=="));
  if (op == "~" ||
      (op == "+" && a.kind == Value::String && b.kind == Value::String)) {
    TextBuilder joined(line);
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
      return failAt(line, "'in' needs a string, list or dict");
    return Value::of(found == (op == "in"));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    int order;
    if (isNumber(a) && isNumber(b))
      order = asDouble(a) < asDouble(b) ? -1 : asDouble(a) > asDouble(b);
    else if (a.kind == Value::String && b.kind == Value::String)
      order = a.string.compare(b.string);
    else
      return failAt(line, "'" + op + "' compares numbers or strings");
    bool result = op == "<"    ? order < 0
                  : op == ">"  ? order > 0
                  : op == "<=" ? order <= 0
                               : order >= 0;
    return Value::of(result);
  }
  if (op == "+" && a.kind == Value::List && b.kind == Value::List) {
    ItemsBuilder joined(Value::List, line);
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
    llvm::Expected<uint64_t> times = timesOf(isSequence(a) ? b : a, line);
    if (!times)
      return times.takeError();
    if (sequence.kind == Value::String) {
      TextBuilder repeated(line);
      if (llvm::Error error = repeated.append(sequence.string, *times))
        return std::move(error);
      return Value::of(repeated.take());
    }
    ItemsBuilder repeated(Value::List, line);
    if (llvm::Error error = repeated.append(*sequence.list, *times))
      return std::move(error);
    return repeated.take();
  }
  if (!isNumber(a) || !isNumber(b))
    return failAt(line,
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
          return failAt(line, "an integer past 64 bits");
      return Value::of(result);
    }
    return Value::of(std::pow(asDouble(a), asDouble(b)));
  }
  if (op == "/") {
    if (asDouble(b) == 0)
      return failAt(line, "division by zero");
    return Value::of(asDouble(a) / asDouble(b));
  }
  if (integers) {
    int64_t x = asInt(a), y = asInt(b), result;
    if ((op == "//" || op == "%") && y == 0)
      return failAt(line, "division by zero");
    bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &result)
                    : op == "-" ? __builtin_sub_overflow(x, y, &result)
                    : op == "*" ? __builtin_mul_overflow(x, y, &result)
                                : (x == INT64_MIN && y == -1);
    if (overflow)
      return failAt(line, "an integer past 64 bits");
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
    return failAt(line, "division by zero");
  if (op == "//")
    return Value::of(std::floor(x / y));
  return Value::of(x - std::floor(x / y) * y);
}
