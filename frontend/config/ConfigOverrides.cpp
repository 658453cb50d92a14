//===- ConfigOverrides.cpp - key=value overrides through reflection -------===//

#include "frontend/config/JobConfig.h"

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace twill;
namespace pb = google::protobuf;

static llvm::Error overrideError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The allowed values of an enum field, for messages.
static std::string enumValues(const pb::FieldDescriptor &field) {
  std::string values;
  const pb::EnumDescriptor &type = *field.enum_type();
  for (int i = 0; i < type.value_count(); ++i)
    values += (i ? ", " : "") + type.value(i)->name();
  return values;
}

namespace {
/// Keeps a text-format parser's complaints for the override's own error
/// (protobuf would otherwise log them raw to stderr).
class QuietErrors : public pb::io::ErrorCollector {
public:
  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    if (first.empty())
      first = llvm::formatv("{0}:{1}: {2}", line + 1, column + 1, message);
  }
  std::string first;
};
} // namespace

/// Sets (or, for a repeated field, appends) one value written as text.
static llvm::Error setOneValue(pb::Message &message,
                               const pb::FieldDescriptor &field,
                               llvm::StringRef key, llvm::StringRef value) {
  const pb::Reflection &reflection = *message.GetReflection();
  if (field.cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
    if (field.is_repeated())
      reflection.AddString(&message, &field, value.str());
    else
      reflection.SetString(&message, &field, value.str());
    return llvm::Error::success();
  }
  QuietErrors errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFieldValueFromString(value.str(), &field, &message))
    return llvm::Error::success();
  if (field.enum_type())
    return overrideError(key + ": '" + value + "' is not one of " +
                         enumValues(field));
  return overrideError(key + ": '" + value + "' is not a valid " +
                       field.cpp_type_name() + " value");
}

static llvm::Error setField(pb::Message &message,
                            const pb::FieldDescriptor &field,
                            llvm::StringRef key, llvm::StringRef value) {
  const pb::Reflection &reflection = *message.GetReflection();
  if (value.empty() &&
      field.cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) {
    // `key=` unsets: the default for a value, absent for a section.
    reflection.ClearField(&message, &field);
    return llvm::Error::success();
  }
  if (field.message_type() && !field.is_repeated()) {
    // A whole section, written as {textproto}: `full_finetune={}`.
    if (!value.consume_front("{") || !value.consume_back("}"))
      return overrideError(key + " is a section: set one of its fields (" +
                           key + ".<field>=...) or write " + key +
                           "={field: value ...}");
    pb::Message *section = reflection.MutableMessage(&message, &field);
    QuietErrors errors;
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    if (!parser.MergeFromString(value.str(), section))
      return overrideError(key + ": cannot parse '{" + value + "}' as " +
                           field.message_type()->name() + ": " + errors.first);
    return llvm::Error::success();
  }
  if (!field.is_repeated())
    return setOneValue(message, field, key, value);
  // Repeated scalars: the list replaces the old one.
  reflection.ClearField(&message, &field);
  llvm::SmallVector<llvm::StringRef> items;
  value.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items)
    if (llvm::Error error = setOneValue(message, field, key, item.trim()))
      return error;
  return llvm::Error::success();
}

/// The fields `key` ("lora.rank") names, from JobConfig down; empty when
/// a part names no field.
static llvm::SmallVector<const pb::FieldDescriptor *>
fieldsOf(llvm::StringRef key) {
  llvm::SmallVector<llvm::StringRef> parts;
  key.split(parts, '.');
  llvm::SmallVector<const pb::FieldDescriptor *> fields;
  const pb::Descriptor *type = JobConfig::descriptor();
  for (llvm::StringRef part : parts) {
    const pb::FieldDescriptor *field =
        type ? type->FindFieldByName(part.str()) : nullptr;
    if (!field)
      return {};
    fields.push_back(field);
    type = field->is_repeated() ? nullptr : field->message_type();
  }
  return fields;
}

llvm::Error twill::applyOverride(JobConfig &config,
                                 llvm::StringRef assignment) {
  auto [key, value] = assignment.split('=');
  key = key.trim();
  if (!assignment.contains('=') || key.empty())
    return overrideError("override '" + assignment +
                         "' must look like field.path=value, e.g. "
                         "train.batch_size=2");

  // Resolve the whole path before changing anything.
  llvm::SmallVector<const pb::FieldDescriptor *> fields = fieldsOf(key);
  if (fields.empty())
    return overrideError("unknown config key '" + key + "'" +
                         unknownFieldHint(*JobConfig::descriptor(), key));

  pb::Message *message = &config;
  for (const pb::FieldDescriptor *section : llvm::ArrayRef(fields).drop_back())
    message = message->GetReflection()->MutableMessage(message, section);
  return setField(*message, *fields.back(), key, value.trim());
}

llvm::Error twill::applyOverrides(JobConfig &config,
                                  llvm::ArrayRef<std::string> assignments) {
  // The members of each oneof the overrides choose (`lora` and
  // `full_finetune` of `adaptation`), each by the first override that
  // chose it; `member=` (empty) unchoses it. Two members still chosen
  // contradict each other: applied in order, the last would silently drop
  // the first's settings (a job file refuses the pair too).
  std::map<const pb::OneofDescriptor *,
           std::map<const pb::FieldDescriptor *, std::string>>
      chosen;
  for (const std::string &assignment : assignments) {
    auto [key, value] = llvm::StringRef(assignment).split('=');
    // An unknown key chooses nothing: applyOverride names it.
    llvm::SmallVector<const pb::FieldDescriptor *> fields =
        fieldsOf(key.trim());
    for (const pb::FieldDescriptor *field : fields)
      if (const pb::OneofDescriptor *oneof = field->real_containing_oneof()) {
        if (field == fields.back() && value.trim().empty())
          chosen[oneof].erase(field);
        else
          chosen[oneof].try_emplace(field, assignment);
      }
  }
  auto position = [&](const std::string &assignment) {
    return llvm::find(assignments, assignment) - assignments.begin();
  };
  for (const auto &[oneof, members] : chosen)
    if (members.size() > 1) {
      auto first = members.begin(), second = std::next(first);
      if (position(second->second) < position(first->second))
        std::swap(first, second); // in the command line's order
      return overrideError(llvm::formatv(
          "'{0}' and '{1}' contradict each other: {2} and {3} are "
          "alternatives (one of {4}); keep one, or unset the other "
          "({2}= or {3}=)",
          first->second, second->second, first->first->name(),
          second->first->name(), oneof->name()));
    }
  for (const std::string &assignment : assignments)
    if (llvm::Error error = applyOverride(config, assignment))
      return error;
  return llvm::Error::success();
}
