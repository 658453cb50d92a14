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

#include "llvm/ADT/ArrayRef.h"
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
/// A function a template calls, with its arguments and the call's line.
using Function =
    std::function<llvm::Expected<Value>(Values &, Keywords &, int line)>;

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
  /// What a list, dict or bound method holds (sizeOf) and how deeply it
  /// nests, counted once where it is made (ItemsBuilder, methods): neither
  /// changes after, as Jinja's sandbox gives lists and dicts no method that
  /// changes them. A namespace, which `set` changes, counts as neither: its
  /// attributes are counted in Namespaces.
  uint64_t size = 0;
  int nesting = 0;

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
  static Value of(jinja::Function f) {
    Value v = make(Function);
    v.function = std::make_shared<jinja::Function>(std::move(f));
    return v;
  }

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
  enum Kind {
    Sequence,
    Text,
    Output,
    If,
    For,
    Set,
    SetBlock, // {% set name %} body {% endset %}: the body's text
    Break,
    Continue,
    Macro,       // {% macro name(params) %} body {% endmacro %}
    With,        // {% with name = value, ... %} body {% endwith %}
    FilterBlock, // {% filter f | g %} body {% endfilter %}
  } kind;
  int line = 0;
  std::string text; // Text
  /// Output's, Set's value, For's iterable; FilterBlock's filters, applied
  /// to kFilteredBlock.
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, NodePtr>> branches; // If (null: else)
  /// For's names, Set's and SetBlock's name, Macro's name.
  std::vector<std::string> targets;
  std::string attribute; // Set ns.attribute
  ExprPtr condition;     // For ... if condition
  /// For's, SetBlock's, Macro's, With's, FilterBlock's; For's else.
  NodePtr body, otherwise;
  std::vector<NodePtr> children; // Sequence
  /// With's names and values; Macro's parameters and defaults (null: none).
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  bool recursive = false; // For ... recursive: loop(items) renders them
};

/// The name a FilterBlock's filters read its body's text by: no template
/// can name it (names have no spaces).
inline constexpr llvm::StringLiteral kFilteredBlock = " filtered block";

// What a template makes is bounded: a template comes with a downloaded
// model, so it is untrusted, and must not exhaust memory or time. Each
// bound is far past what a real chat template makes (a few KiB of text, from
// values that hold one conversation).

/// The most one string, list or dict may hold (sizeOf), and the rendered
/// text: 16 MiB is four times the text of a million-token conversation,
/// and keeps what handling a value takes at worst (printed, escaped for
/// JSON, cut into characters: tens of times its size) under a GiB.
inline constexpr uint64_t kMaxSize = uint64_t(16) << 20;
/// The deepest lists and dicts nest (the variables' JSON is read to 256):
/// printing, tojson, == and freeing one recurse through it.
inline constexpr int kMaxNesting = 512;
/// The most items range() makes: transformers' sandbox's MAX_RANGE.
inline constexpr uint64_t kMaxRange = 100000;

/// An error at template line `line` (0: none, as the variables' JSON has, or
/// one the caller names).
llvm::Error failAt(int line, const llvm::Twine &what);

/// What `value` holds, as kMaxSize bounds it: a string's bytes; a list's or
/// dict's items (keys too), each with the memory an item takes however
/// small its value, so that a list of a million empty strings is large.
uint64_t sizeOf(const Value &value);
/// Refuses `size` past kMaxSize at `line`: the one check of the bound.
llvm::Error checkSize(uint64_t size, int line);

/// A string made piece by piece: the one place a template's strings grow
/// (the rendered text, ~ and +, repetition, join, replace, tojson), each
/// piece refused before it is copied once the string would pass kMaxSize.
class TextBuilder {
public:
  explicit TextBuilder(int line) : line(line) {}
  /// Appends `piece`, `times` times: sized first, so that '' * 10**18 is ''
  /// at once and 'a' * 10**18 is refused at once.
  llvm::Error append(llvm::StringRef piece, uint64_t times = 1);
  std::string take() { return std::move(text); }

private:
  std::string text;
  int line;
};

/// A list or dict made item by item: the one place a template's lists and
/// dicts are made, each item refused before it is copied once the value
/// would pass kMaxSize or nest past kMaxNesting.
class ItemsBuilder {
public:
  /// A list's (kind List) or a dict's (kind Dict) items.
  ItemsBuilder(Value::Kind kind, int line);
  /// A list's `items`, `times` times over (sized first, as text's).
  llvm::Error append(llvm::ArrayRef<Value> items, uint64_t times = 1);
  /// A dict's item `key`: a key given again keeps its place and takes the
  /// new value, as Python's dicts do.
  llvm::Error add(std::string key, Value item);
  Value take() { return std::move(value); }

private:
  /// Counts `times` more items of `each` bytes, nested `nesting` deep.
  llvm::Error grow(uint64_t each, uint64_t times, int nesting);
  Value value;
  int line;
};

/// The namespaces one render makes. What they hold is bounded all together
/// as one value is, since a loop can make any number of namespaces and
/// fill each later; and when the render ends every namespace's attributes
/// are dropped, so that one that holds itself (`set ns.x = ns`) is not
/// leaked, nor a chain of thousands freed by a recursion as deep.
class Namespaces {
public:
  Namespaces() = default;
  Namespaces(const Namespaces &) = delete;
  Namespaces &operator=(const Namespaces &) = delete;
  ~Namespaces();
  /// namespace(attribute=value, ...).
  llvm::Expected<Value> make(const Keywords &attributes, int line);
  /// {% set space.name = value %}.
  llvm::Error set(const Value &space, const std::string &name, Value value,
                  int line);

private:
  std::vector<std::shared_ptr<Dict>> made;
  uint64_t held = 0;
};

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
/// Python's name of `value`'s type, as its TypeErrors give it.
std::string typeName(const Value &value);
/// An int (or bool) as Python's operator.index takes it; another type is
/// refused as Python refuses it.
llvm::Expected<int64_t> integerOf(const Value &value, int line);
/// `a op b` for a binary operator but `and` and `or` (JinjaOperators.cpp).
llvm::Expected<Value> applyBinary(llvm::StringRef op, const Value &a,
                                  const Value &b, int line);
/// The times a sequence is repeated (`*`): an int (none below 0), as
/// Python's.
llvm::Expected<uint64_t> timesOf(const Value &count, int line);
/// json.dumps(value, ensure_ascii=False, indent=indent): transformers'
/// tojson (indent none or undefined: none).
llvm::Expected<std::string> toJson(const Value &value, const Value &indent,
                                   int line);
/// The items a for loop walks, as a list: a list's, a dict's keys, a
/// string's characters; none of Undefined.
llvm::Expected<Value> iterate(const Value &value, int line);
/// Python's len(range(start, stop, step)), step not 0: found in unsigned
/// arithmetic, where no distance overflows.
uint64_t rangeLength(int64_t start, int64_t stop, int64_t step);
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
/// Their namespaces are made in `namespaces`.
void defineGlobals(llvm::StringMap<Value> &globals, Namespaces &namespaces);
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
