//===- TrainingData.cpp - the rows a run trains and evaluates on ----------===//

#include "runtime/train/TrainingData.h"

#include "runtime/data/ChatFormat.h"
#include "runtime/data/PreferenceDataset.h"
#include "runtime/data/TextDataset.h"
#include "runtime/data/TokenizedDataset.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;

/// The job's tokenizer: `tokenizer` in the job, else the base model
/// folder's; and where it is.
static llvm::Expected<std::pair<std::unique_ptr<Tokenizer>, std::string>>
loadTokenizer(const JobConfig &job) {
  std::string format = DataConfig::Format_Name(job.data().format());
  std::string path = job.tokenizer();
  if (path.empty()) {
    if (job.checkpoint().base_dir().empty())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "data.format " + format +
              " needs a tokenizer: set `tokenizer` in the job (a "
              "tokenizer.json, or Llama 3's tokenizer.model) or "
              "checkpoint.base_dir (a model folder holding one)");
    llvm::Expected<std::string> found =
        Tokenizer::findInModel(job.checkpoint().base_dir());
    if (!found)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "data.format " + format +
              " needs a tokenizer, and the base model has none: " +
              llvm::toString(found.takeError()) +
              " (or set `tokenizer` in the job)");
    path = *found;
  }
  llvm::Expected<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(path);
  if (!tokenizer)
    return tokenizer.takeError();
  return std::make_pair(std::move(*tokenizer), path);
}

/// The job's chat format, read with its tokenizer: how ALPACA, CHAT and
/// PREFERENCE data become tokens.
static llvm::Expected<std::pair<std::unique_ptr<Tokenizer>, ChatFormat>>
loadChatFormat(const JobConfig &job, llvm::StringRef path, const DataLog &log) {
  auto tokenizer = loadTokenizer(job);
  if (!tokenizer)
    return tokenizer.takeError();
  llvm::Expected<ChatFormat> chatFormat =
      ChatFormat::find(*tokenizer->first, tokenizer->second,
                       job.data().chat_template(), job.checkpoint().base_dir());
  if (!chatFormat)
    return chatFormat.takeError();
  log.report << path << ": conversations in " << chatFormat->description()
             << "\n";
  return std::make_pair(std::move(tokenizer->first), std::move(*chatFormat));
}

/// DPO's rows: a preference pair each, chosen and rejected side by side.
static llvm::Expected<std::vector<Row>>
readPairRows(const JobConfig &job, llvm::StringRef path, const DataLog &log) {
  auto tokenized = readTokenizedPairs(path);
  if (!tokenized)
    return tokenized.takeError();
  llvm::Expected<std::vector<PreferencePair>> pairs =
      std::vector<PreferencePair>();
  if (*tokenized) {
    *pairs = std::move(**tokenized);
  } else {
    auto format = loadChatFormat(job, path, log);
    if (!format)
      return format.takeError();
    pairs = readPreferenceJsonl(path, *format->first, format->second);
  }
  if (!pairs)
    return pairs.takeError();
  if (llvm::Error error =
          checkPairVocabulary(*pairs, path, job.model().vocab_size()))
    return std::move(error);
  int64_t seqLen = job.train().seq_len();
  int64_t dropped = dropFullyTruncated(*pairs, seqLen);
  log.report << llvm::formatv("{0}: {1} preference pairs in rows of 2 x {2}",
                              path, pairs->size(), seqLen);
  if (dropped)
    log.report << llvm::formatv(" ({0} pairs whose prompt fills seq_len "
                                "dropped, as TRL drops them)",
                                dropped);
  log.report << "\n";
  return pairRows(*pairs, seqLen);
}

/// Fails where no token of `path` is trained on (the run would update
/// nothing, and end as if it had trained); warns where cutting examples to
/// seq_len loses most labels, or an example has none.
static llvm::Error checkLabels(const PackResult &packed, llvm::StringRef path,
                               int64_t seqLen, const DataLog &log) {
  int64_t labels = packed.labelsKept + packed.labelsCut;
  std::string longest = llvm::formatv(
      "the longest example has {0} tokens: train.seq_len={0} keeps every "
      "label",
      packed.longestExample);
  if (!packed.labelsKept)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        labels ? llvm::formatv("{0}: no token is trained on: cutting the "
                               "examples to train.seq_len={1} drops all {2} "
                               "labelled tokens; {3}",
                               path, seqLen, labels, longest)
                     .str()
               : path + ": no token is trained on: no example has a "
                        "labelled token (chat data trains on the assistant's "
                        "turns; a conversation without one trains on nothing "
                        "unless data.train_on_input)");
  if (packed.labelsCut > packed.labelsKept)
    log.warn() << llvm::formatv(
        "{0}: cutting the examples to train.seq_len={1} "
        "drops {2} of their {3} labelled tokens; {4}\n",
        path, seqLen, packed.labelsCut, labels, longest);
  if (packed.unlabelledExamples)
    log.warn() << llvm::formatv("{0}: {1} examples have no labelled token and "
                                "train on nothing (the first at line {2}: a "
                                "conversation without an assistant turn?)\n",
                                path, packed.unlabelledExamples,
                                packed.firstUnlabelledLine);
  return llvm::Error::success();
}

llvm::Expected<std::vector<Row>> twill::readRows(const JobConfig &job,
                                                 llvm::StringRef path,
                                                 const DataLog &log) {
  const DataConfig &data = job.data();
  if (data.format() == DataConfig::PREFERENCE)
    return readPairRows(job, path, log);
  llvm::Expected<std::vector<Example>> examples = std::vector<Example>();
  if (data.format() == DataConfig::TOKENIZED) {
    examples = readTokenizedJsonl(path);
  } else {
    auto format = loadChatFormat(job, path, log);
    if (!format)
      return format.takeError();
    examples =
        data.format() == DataConfig::ALPACA
            ? readAlpacaJsonl(path, format->second, data.train_on_input())
            : readChatJsonl(path, format->second, data.train_on_input());
  }
  if (!examples)
    return examples.takeError();
  if (llvm::Error error =
          checkVocabulary(*examples, path, job.model().vocab_size()))
    return std::move(error);
  int64_t seqLen = job.train().seq_len();
  PackResult packed = packExamples(*examples, seqLen, job.data().packed());
  log.report << llvm::formatv("{0}: {1} examples in {2} rows of {3}", path,
                              examples->size(), packed.rows.size(), seqLen);
  if (packed.truncatedExamples)
    log.report << llvm::formatv(" ({0} examples longer than seq_len cut, "
                                "{1} tokens dropped)",
                                packed.truncatedExamples,
                                packed.truncatedTokens);
  log.report << "\n";
  if (llvm::Error error = checkLabels(packed, path, seqLen, log))
    return std::move(error);
  return std::move(packed.rows);
}

llvm::Expected<TrainingData>
twill::readTrainingData(const JobConfig &job, llvm::StringRef dataOverride,
                        llvm::StringRef evalPath, const DataLog &log) {
  std::string path =
      dataOverride.empty() ? job.data().path() : dataOverride.str();
  if (path.empty())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "no data: set data.path in the job or pass --data");
  // A missing file is named with the setting that named it.
  for (auto [setting, file] :
       {std::pair<llvm::StringRef, llvm::StringRef>{
            dataOverride.empty() ? "data.path" : "--data", path},
        {"--eval-data", evalPath}})
    if (!file.empty() && !llvm::sys::fs::is_regular_file(file))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          setting + ": " + file + " is not a file (JSONL, one example a line)");
  TrainingData data;
  data.source = path;
  llvm::Expected<std::vector<Row>> rows = readRows(job, path, log);
  if (!rows)
    return rows.takeError();
  data.rows = std::move(*rows);
  if (!evalPath.empty()) {
    llvm::Expected<std::vector<Row>> read = readRows(job, evalPath, log);
    if (!read)
      return read.takeError();
    data.evalRows = std::move(*read);
  }
  return std::move(data);
}
