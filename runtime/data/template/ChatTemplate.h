//===- ChatTemplate.h - a model's own chat template -------------*- C++ -*-===//
//
// The Jinja template a model ships (tokenizer_config.json's chat_template
// or chat_template.jinja), rendered as transformers' apply_chat_template
// renders it: Jinja with trim_blocks and lstrip_blocks, the messages,
// bos_token, eos_token, add_generation_prompt and the template's other
// variables. The subset chat templates use is built: text, {{ }}, {% if /
// elif / else %}, {% for %} (loop.*, a filter, unpacking, else, recursive
// loops), {% set %} (namespace attributes and set blocks too), {% macro %},
// {% with %}, {% filter %}, break and continue, whitespace control;
// expressions with Python's operators, tests, literals, slicing, string
// and dict methods and Jinja's filters (trim, tojson, length, dictsort,
// indent, ...), and raise_exception. A construct outside it (inheritance,
// include, import, call blocks, autoescape) is refused naming it and its
// line, when the template is read.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TEMPLATE_CHATTEMPLATE_H
#define TWILL_RUNTIME_DATA_TEMPLATE_CHATTEMPLATE_H

#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace twill {

namespace jinja {
struct Node;
}

class ChatTemplate {
public:
  /// Reads template `source`; `name` names it in errors.
  static llvm::Expected<ChatTemplate> parse(llvm::StringRef source,
                                            llvm::StringRef name);
  /// Reads the template of a model folder's file: tokenizer_config.json's
  /// chat_template (the one named "default" of a list), or a
  /// chat_template.jinja's text.
  static llvm::Expected<ChatTemplate> load(llvm::StringRef path);
  ChatTemplate(ChatTemplate &&) noexcept;
  ChatTemplate &operator=(ChatTemplate &&) noexcept;
  ~ChatTemplate();

  /// The text of the template for `variablesJson`, a JSON object of its
  /// variables (messages, bos_token, ...), read keeping each object's keys
  /// in their order as Python's dicts do; a template that raises, or
  /// misuses a value, is an error naming its line, as is one that would
  /// make more than the bounds in Jinja.h allow (a template is untrusted).
  llvm::Expected<std::string> render(llvm::StringRef variablesJson) const;

  /// Whether the template's text holds `text` as a string literal ('tool',
  /// "observation"): the roles it compares messages' with, among others.
  bool quotes(llvm::StringRef text) const;

private:
  ChatTemplate() = default;
  std::string name, source;
  std::shared_ptr<jinja::Node> root;
};

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TEMPLATE_CHATTEMPLATE_H
