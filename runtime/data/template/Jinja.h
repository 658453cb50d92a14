//===- Jinja.h - the chat template's syntax tree and values -----*- C++ -*-===//
//
// What ChatTemplate's parser makes (statements and expressions, each with
// its line) and its renderer computes with (Python's values, as Jinja has
// them: none, booleans, numbers, strings, lists, dicts, namespaces,
// functions, and Undefined for what a template names and nothing holds).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TEMPLATE_JINJA_H
#define TWILL_RUNTIME_DATA_TEMPLATE_JINJA_H

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace twill::jinja {

struct Value;
using Values = std::vector<Value>;
using Keywords = std::vector<std::pair<std::string, Value>>;
using Function = std::function<llvm::Expected<Value>(Values &, Keywords &)>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items; // in insertion order
  Value *find(llvm::StringRef key);
};

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };
  Kind kind = Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::shared_ptr<Values> list;
  std::shared_ptr<jinja::Dict> dict; // a dict's, or a namespace's
  bool isNamespace = false;
  std::shared_ptr<jinja::Function> function;

  static Value none() { return make(None); }
  static Value of(bool b) {
    Value v = make(Bool);
    v.boolean = b;
    return v;
  }
  static Value of(int64_t i) {
    Value v = make(Int);
    v.integer = i;
    return v;
  }
  static Value of(double d) {
    Value v = make(Float);
    v.number = d;
    return v;
  }
  static Value of(std::string s) {
    Value v = make(String);
    v.string = std::move(s);
    return v;
  }
  static Value of(Values items) {
    Value v = make(List);
    v.list = std::make_shared<Values>(std::move(items));
    return v;
  }
  static Value emptyDict() {
    Value v = make(Dict);
    v.dict = std::make_shared<jinja::Dict>();
    return v;
  }
  static Value of(jinja::Function f) {
    Value v = make(Function);
    v.function = std::make_shared<jinja::Function>(std::move(f));
    return v;
  }

private:
  static Value make(Kind kind) {
    Value v;
    v.kind = kind;
    return v;
  }
};

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;
struct Expr {
  enum Kind {
    Literal, // `value`
    Name,    // `name`
    ListOf,  // [args...]
    DictOf,  // {keys[i]: args[i]}
    Attr,    // args[0].name
    Item,    // args[0][args[1]]
    Slice,   // args[0][args[1]:args[2]:args[3]] (null: absent)
    Call,    // args[0](args[1..], keywords)
    Filter,  // args[0] | name(args[1..], keywords)
    Test,    // args[0] is [not] name(args[1..])
    Unary,   // name ("not", "-", "+") args[0]
    Binary,  // args[0] name args[1]
    Ternary, // args[0] if args[1] else args[2] (null: undefined)
  } kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::string> keys;                         // DictOf's
  std::vector<std::pair<std::string, ExprPtr>> keywords; // Call's, Filter's
  bool negated = false;                                  // Test's `is not`
};

struct Node;
using NodePtr = std::shared_ptr<Node>;
struct Node {
  enum Kind { Sequence, Text, Output, If, For, Set, Break, Continue } kind;
  int line = 0;
  std::string text; // Text
  ExprPtr expr;     // Output, Set's value, For's
  std::vector<std::pair<ExprPtr, NodePtr>> branches; // If (null: else)
  std::vector<std::string> targets;                  // For's names, Set's name
  std::string attribute;                             // Set ns.attribute
  ExprPtr condition;                                 // For ... if condition
  NodePtr body, otherwise;                           // For (else)
  std::vector<NodePtr> children;                     // Sequence
};

/// The most text a template may make, and items a range may hold: a
/// template that would make more is refused rather than left to exhaust
/// memory.
inline constexpr size_t kMaxText = size_t(64) << 20, kMaxRange = size_t(1)
                                                                 << 20;

/// An error at template line `line`.
llvm::Error failAt(int line, const llvm::Twine &what);

// Values (JinjaValues.cpp).
/// JSON text as values, each object's keys in their order.
llvm::Expected<Value> readJson(llvm::StringRef text);
/// Python's truthiness, str(), ==, and numbers' values.
bool truthy(const Value &value);
std::string text(const Value &value);
bool equal(const Value &a, const Value &b);
bool isNumber(const Value &value);
double asDouble(const Value &value);
int64_t asInt(const Value &value);
/// json.dumps(value, ensure_ascii=False, indent=indent), appended to `out`.
void toJson(const Value &value, std::optional<int64_t> indent, int depth,
            std::string &out);
/// The items a for loop walks: a list's, a dict's keys, a string's
/// characters; nothing of Undefined.
llvm::Expected<Values> iterate(const Value &value, int line);
/// Python's index `index` into `size` items (negative from the end); none
/// out of range.
std::optional<size_t> pythonIndex(int64_t index, size_t size);
/// The characters of UTF-8 `text`.
std::vector<std::string> characters(llvm::StringRef text);

// What templates call (JinjaLibrary.cpp).
/// Whether the renderer has filter (test) `name`.
bool hasFilter(llvm::StringRef name);
bool hasTest(llvm::StringRef name);
/// transformers' globals: raise_exception, namespace, range, strftime_now.
void defineGlobals(llvm::StringMap<Value> &globals);
/// `object.name`: a dict's item (or method), a namespace's attribute, a
/// string's method; Undefined where none.
llvm::Expected<Value> attributeOf(const Value &object, llvm::StringRef name,
                                  int line);
llvm::Expected<bool> applyTest(llvm::StringRef name, const Value &value,
                               const Values &args, int line);
llvm::Expected<Value> applyFilter(llvm::StringRef name, const Value &value,
                                  const Values &args, const Keywords &keywords,
                                  int line);

/// The tree of template `source`; an error names `name` and the line.
llvm::Expected<NodePtr> parse(llvm::StringRef source, llvm::StringRef name);

} // namespace twill::jinja

#endif // TWILL_RUNTIME_DATA_TEMPLATE_JINJA_H
