//===- FieldHints.cpp - what to say of a field the job config lacks -------===//
//
// A job written with another trainer's names (Hugging Face's
// TrainingArguments, PEFT, TRL, torchtune, Axolotl) or a misspelt one is
// answered with the field Twill has: the names each field is known by
// elsewhere are stated once, in proto/job_config.proto (`known_as`), and a
// name like none is answered with the fields that are there, not a guess.
//
//===----------------------------------------------------------------------===//

#include "frontend/config/JobConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <limits>

using namespace twill;
namespace pb = google::protobuf;

/// A field and its dotted path below the message it was collected from.
using FieldPaths =
    std::vector<std::pair<std::string, const pb::FieldDescriptor *>>;

/// Every field path below `type`, sections and leaves, depth first.
static void collectFields(const pb::Descriptor &type, const std::string &prefix,
                          FieldPaths &fields) {
  for (int i = 0; i < type.field_count(); ++i) {
    const pb::FieldDescriptor &field = *type.field(i);
    std::string path = prefix + field.name();
    fields.push_back({path, &field});
    if (field.message_type())
      collectFields(*field.message_type(), path + ".", fields);
  }
}

static FieldPaths fieldsBelow(const pb::Descriptor &type) {
  FieldPaths fields;
  collectFields(type, "", fields);
  return fields;
}

static llvm::StringRef leafOf(llvm::StringRef path) {
  return path.rsplit('.').second.empty() ? path : path.rsplit('.').second;
}

/// The job's field (of `job`'s) another trainer calls `name`, or the one of
/// that name in another section; empty if none.
static std::string fieldKnownAs(const FieldPaths &job, llvm::StringRef name) {
  for (const auto &[path, field] : job)
    for (int i = 0; i < field->options().ExtensionSize(known_as); ++i)
      if (field->options().GetExtension(known_as, i) == name)
        return path;
  for (const auto &[path, field] : job)
    if (field->name() == name)
      return path;
  return "";
}

/// The message `key`'s leading parts name below `scope` (its section), and
/// that section's path from the job (whose fields are `job`).
static std::pair<const pb::Descriptor *, std::string>
deepestSection(const FieldPaths &job, const pb::Descriptor &scope,
               llvm::StringRef key) {
  std::string path;
  for (const auto &[sectionPath, field] : job)
    if (field->message_type() == &scope) {
      path = sectionPath;
      break;
    }
  const pb::Descriptor *type = &scope;
  llvm::SmallVector<llvm::StringRef> parts;
  key.split(parts, '.');
  for (llvm::StringRef part : llvm::ArrayRef(parts).drop_back()) {
    const pb::FieldDescriptor *field = type->FindFieldByName(part.str());
    if (!field || !field->message_type())
      break;
    type = field->message_type();
    path += (path.empty() ? "" : ".") + part.str();
  }
  return {type, path};
}

std::string twill::unknownFieldHint(const pb::Descriptor &scope,
                                    llvm::StringRef key) {
  FieldPaths job = fieldsBelow(*JobConfig::descriptor());
  if (std::string known = fieldKnownAs(job, leafOf(key)); !known.empty())
    return leafOf(known) == leafOf(key) ? " (did you mean " + known + "?)"
                                        : " (Twill calls it " + known + ")";

  std::string best;
  unsigned bestDistance = std::numeric_limits<unsigned>::max();
  for (const auto &[path, field] : fieldsBelow(scope)) {
    // A misspelt path, or the right field name under the wrong section.
    unsigned distance = std::min(llvm::StringRef(path).edit_distance(key),
                                 leafOf(path).edit_distance(leafOf(key)) + 1);
    if (distance < bestDistance) {
      best = path;
      bestDistance = distance;
    }
  }
  // A few letters wrong: a typo. Anything further is no suggestion worth
  // following, so say what is there instead.
  if (bestDistance <= std::max<size_t>(2, leafOf(key).size() / 4))
    return " (did you mean " + best + "?)";
  auto [section, path] = deepestSection(job, scope, key);
  std::string names;
  for (int i = 0; i < section->field_count(); ++i)
    names += (i ? ", " : "") + section->field(i)->name();
  return " (the fields of " + (path.empty() ? "the job" : path) + " are " +
         names + ")";
}
