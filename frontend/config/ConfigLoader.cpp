//===- ConfigLoader.cpp - job textproto and the layering of sources -------===//

#include "frontend/config/JobConfig.h"

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
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
    llvm::StringRef source =
        line < (int)lines.size() ? lines[line].rtrim() : "";
    errors += llvm::formatv("{0}:{1}:{2}: {3}{4}\n  {5}\n  {6}^\n", sourceName,
                            line + 1, column + 1, message, hintFor(message),
                            source, std::string(column, ' '));
  }

  std::string errors;

private:
  static std::string hintFor(llvm::StringRef message) {
    static const llvm::Regex unknownField(
        "Message type \"([A-Za-z0-9_.]+)\" has no field named \"([^\"]+)\"");
    llvm::SmallVector<llvm::StringRef, 3> match;
    if (!unknownField.match(message, &match))
      return "";
    const pb::Descriptor *type =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(
            match[1].str());
    if (!type)
      return "";
    return " (did you mean " + closestFieldPath(*type, match[2]) + "?)";
  }

  llvm::StringRef text;
  std::string sourceName;
};
} // namespace

llvm::Expected<JobConfig> twill::parseJobConfig(llvm::StringRef text,
                                                llvm::StringRef sourceName) {
  JobConfig config;
  TextErrorCollector collector(text, sourceName);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text.str(), &config))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::StringRef(collector.errors).rtrim());
  return config;
}

llvm::Expected<JobConfig>
twill::loadJobConfig(llvm::StringRef jobPath,
                     llvm::ArrayRef<std::string> overrides) {
  auto buffer = llvm::MemoryBuffer::getFile(jobPath, /*IsText=*/true);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read job %s: %s",
                                   jobPath.str().c_str(),
                                   buffer.getError().message().c_str());
  llvm::Expected<JobConfig> config =
      parseJobConfig((*buffer)->getBuffer(), jobPath);
  if (!config)
    return config.takeError();
  for (const std::string &assignment : overrides)
    if (llvm::Error error = applyOverride(*config, assignment))
      return std::move(error);

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
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid job " + jobPath.str() + ":\n" +
                                       llvm::toString(std::move(error)));
  return config;
}
