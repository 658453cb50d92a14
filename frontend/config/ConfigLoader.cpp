//===- ConfigLoader.cpp - job textproto and the layering of sources -------===//

#include "frontend/config/JobConfig.h"
#include "support/ReadFile.h"

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

using namespace twill;
namespace pb = google::protobuf;

namespace {
/// Collects textproto errors as "file:line:col: message" followed by the
/// source line and a caret, adding a "did you mean" hint to unknown field
/// names.
class TextErrorCollector : public pb::io::ErrorCollector {
public:
  TextErrorCollector(llvm::StringRef text, llvm::StringRef sourceName)
      : text(text), sourceName(sourceName) {}

  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    llvm::SmallVector<llvm::StringRef> lines;
    text.split(lines, '\n');
    placeAtEnumValue(message, lines, line, column);
    llvm::StringRef source =
        line < (int)lines.size() ? lines[line].rtrim() : "";
    errors += llvm::formatv("{0}:{1}:{2}: {3}{4}\n  {5}\n  {6}^\n", sourceName,
                            line + 1, column + 1, message, hintFor(message),
                            source, std::string(column, ' '));
  }

  std::string errors;

private:
  static const llvm::Regex &unknownEnum() {
    static const llvm::Regex regex("Unknown enumeration value of \"([^\"]*)\" "
                                   "for field \"([^\"]+)\"");
    return regex;
  }

  /// The parser finds an enum value unknown only at the token after it
  /// (often the section's closing brace, lines on): point at the value.
  static void placeAtEnumValue(llvm::StringRef message,
                               llvm::ArrayRef<llvm::StringRef> lines, int &line,
                               pb::io::ColumnNumber &column) {
    llvm::SmallVector<llvm::StringRef, 3> match;
    if (!unknownEnum().match(message, &match) || match[1].empty())
      return;
    for (int at = std::min<int>(line, lines.size() - 1); at >= 0; --at) {
      llvm::StringRef source = lines[at];
      if (at == line)
        source = source.take_front(column);
      size_t found = source.rfind(match[1]);
      if (found != llvm::StringRef::npos) {
        line = at;
        column = found;
        return;
      }
    }
  }

  static std::string hintFor(llvm::StringRef message) {
    static const llvm::Regex unknownField(
        "Message type \"([A-Za-z0-9_.]+)\" has no field named \"([^\"]+)\"");
    llvm::SmallVector<llvm::StringRef, 3> match;
    if (unknownEnum().match(message, &match))
      return enumChoices(*JobConfig::descriptor(), match[2]);
    if (!unknownField.match(message, &match))
      return "";
    const pb::Descriptor *type =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(
            match[1].str());
    return type ? unknownFieldHint(*type, match[2]) : "";
  }

  /// " (one of A, B, C)": the values of the enum fields named `field`
  /// anywhere under `type` (the parser names the field, not its message).
  static std::string enumChoices(const pb::Descriptor &type,
                                 llvm::StringRef field) {
    for (int i = 0; i < type.field_count(); ++i) {
      const pb::FieldDescriptor &candidate = *type.field(i);
      if (candidate.message_type())
        if (std::string found = enumChoices(*candidate.message_type(), field);
            !found.empty())
          return found;
      if (!candidate.enum_type() || candidate.name() != field)
        continue;
      std::string values;
      for (int v = 0; v < candidate.enum_type()->value_count(); ++v)
        values += (v ? ", " : "") + candidate.enum_type()->value(v)->name();
      return " (one of " + values + ")";
    }
    return "";
  }

  llvm::StringRef text;
  std::string sourceName;
};
} // namespace

llvm::Error twill::parseTextproto(llvm::StringRef text,
                                  llvm::StringRef sourceName,
                                  google::protobuf::Message &message) {
  TextErrorCollector collector(text, sourceName);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text.str(), &message))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::StringRef(collector.errors).rtrim());
  return llvm::Error::success();
}

llvm::Expected<JobConfig> twill::parseJobConfig(llvm::StringRef text,
                                                llvm::StringRef sourceName) {
  JobConfig config;
  if (llvm::Error error = parseTextproto(text, sourceName, config))
    return std::move(error);
  return config;
}

/// The job's fields that name files or folders, those that are set.
static llvm::SmallVector<std::string *> pathFields(JobConfig &config) {
  llvm::SmallVector<std::string *> paths;
  if (config.data().has_path())
    paths.push_back(config.mutable_data()->mutable_path());
  if (config.checkpoint().has_base_dir())
    paths.push_back(config.mutable_checkpoint()->mutable_base_dir());
  if (config.checkpoint().has_output_dir())
    paths.push_back(config.mutable_checkpoint()->mutable_output_dir());
  if (config.has_tokenizer())
    paths.push_back(config.mutable_tokenizer());
  if (config.data().has_chat_template())
    paths.push_back(config.mutable_data()->mutable_chat_template());
  if (config.train().has_tensorboard_dir())
    paths.push_back(config.mutable_train()->mutable_tensorboard_dir());
  return paths;
}

/// Makes each relative path of `config` absolute from `folder`, those left
/// at their defaults too (output_dir's "output").
static void resolvePaths(JobConfig &config, llvm::StringRef folder) {
  if (!config.checkpoint().has_output_dir())
    config.mutable_checkpoint()->set_output_dir(
        config.checkpoint().output_dir());
  for (std::string *path : pathFields(config)) {
    if (path->empty() || llvm::sys::path::is_absolute(*path))
      continue;
    llvm::SmallString<256> absolute(folder);
    llvm::sys::path::append(absolute, *path);
    llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
    *path = absolute.str().str();
  }
}

llvm::Expected<JobConfig>
twill::loadJobConfig(llvm::StringRef jobPath,
                     llvm::ArrayRef<std::string> overrides) {
  auto buffer = readRegularFile(jobPath, kMaxConfigBytes, "job");
  if (!buffer)
    return buffer.takeError();
  llvm::Expected<JobConfig> config =
      parseJobConfig((*buffer)->getBuffer(), jobPath);
  if (!config)
    return config.takeError();
  // A relative path in the job (or a default one) is relative to the job
  // file's folder, and one given as key=value to the directory the command
  // runs in: the job is found wherever it is run from. Both are made
  // absolute here, so the Executable runs from anywhere too.
  llvm::SmallString<256> jobFolder(jobPath), workingFolder;
  if (std::error_code error = llvm::sys::fs::make_absolute(jobFolder))
    return llvm::createStringError(error, "cannot resolve %s: %s",
                                   jobPath.str().c_str(),
                                   error.message().c_str());
  llvm::sys::path::remove_filename(jobFolder);
  resolvePaths(*config, jobFolder);
  if (llvm::Error error = applyOverrides(*config, overrides))
    return std::move(error);
  if (std::error_code error = llvm::sys::fs::current_path(workingFolder))
    return llvm::createStringError(error,
                                   "cannot find the current "
                                   "directory: %s",
                                   error.message().c_str());
  resolvePaths(*config, workingFolder);

  // The model folder's config.json is the lowest layer under the model
  // section: fields the job or the command line set win over it.
  if (config->has_checkpoint() && !config->checkpoint().base_dir().empty()) {
    llvm::SmallString<256> configJson(config->checkpoint().base_dir());
    llvm::sys::path::append(configJson, "config.json");
    llvm::Expected<ModelConfig> imported = importHfConfig(configJson);
    if (!imported)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "checkpoint.base_dir: " +
                                         llvm::toString(imported.takeError()));
    imported->MergeFrom(config->model());
    *config->mutable_model() = std::move(*imported);
  }

  resolveDefaults(*config);
  if (llvm::Error error = validateJobConfig(*config))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "invalid job " + jobPath.str() +
            (config->checkpoint().base_dir().empty()
                 ? std::string()
                 : " (its model section under " +
                       config->checkpoint().base_dir() + "/config.json)") +
            ":\n" + llvm::toString(std::move(error)));
  return config;
}
