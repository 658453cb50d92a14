//===- TokenizedDataset.cpp - pre-tokenized JSONL into rows ---------------===//

#include "runtime/data/TokenizedDataset.h"

#include "runtime/data/JsonLines.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <limits>

using namespace twill;
namespace json = llvm::json;

/// The integers of `key` in `line`, or an error.
static llvm::Expected<std::vector<int32_t>> readIds(const json::Object &line,
                                                    llvm::StringRef key) {
  const json::Array *array = line.getArray(key);
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + key + "' " + what);
  };
  if (!array)
    return fail(line.get("instruction") || line.get("messages")
                    ? "must be an array of integers: data.format is "
                      "TOKENIZED; for {\"instruction\", ...} rows set "
                      "data.format=ALPACA, for {\"messages\": ...} CHAT"
                    : "must be an array of integers (data.format "
                      "TOKENIZED)");
  std::vector<int32_t> ids;
  ids.reserve(array->size());
  for (const json::Value &value : *array) {
    std::optional<int64_t> id = value.getAsInteger();
    if (!id || *id < std::numeric_limits<int32_t>::min() ||
        *id > std::numeric_limits<int32_t>::max())
      return fail("must hold only 32-bit integers");
    ids.push_back(int32_t(*id));
  }
  return ids;
}

llvm::Expected<std::vector<Example>>
twill::readTokenizedJsonl(llvm::StringRef path) {
  std::vector<Example> examples;
  auto fail = [](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
  };
  llvm::Error error = readJsonLines(
      path,
      [&](const json::Object &line, llvm::StringRef text,
          int64_t lineNumber) -> llvm::Error {
        Example example;
        llvm::Expected<std::vector<int32_t>> ids = readIds(line, "input_ids");
        if (!ids)
          return ids.takeError();
        example.inputIds = std::move(*ids);
        if (line.get("labels")) {
          llvm::Expected<std::vector<int32_t>> labels = readIds(line, "labels");
          if (!labels)
            return labels.takeError();
          if (labels->size() != example.inputIds.size())
            return fail(
                llvm::formatv("'labels' has {0} entries, 'input_ids' {1}",
                              labels->size(), example.inputIds.size())
                    .str());
          example.labels = std::move(*labels);
        } else {
          example.labels = example.inputIds;
        }
        if (example.inputIds.empty())
          return fail("'input_ids' is empty");
        example.line = lineNumber;
        examples.push_back(std::move(example));
        return llvm::Error::success();
      });
  if (error)
    return std::move(error);
  return examples;
}

Row twill::paddingRow(int64_t seqLen) {
  // Nothing labelled: nothing for a reference to score either.
  return Row{std::vector<int32_t>(seqLen, 0),
             std::vector<int32_t>(seqLen, kIgnoreLabel),
             std::vector<int32_t>(seqLen, 0),
             std::vector<int32_t>(seqLen, 0),
             std::vector<int32_t>(seqLen, 0),
             std::array<float, 2>{0.0f, 0.0f}};
}

PackResult twill::packExamples(llvm::ArrayRef<Example> examples, int64_t seqLen,
                               bool packed) {
  PackResult result;
  Row row;
  int32_t segment = 0;
  // Fills the rest of the current row with padding in a segment of its own
  // and starts a new one.
  auto finishRow = [&] {
    if (row.tokens.empty())
      return;
    int64_t used = row.tokens.size();
    for (int64_t i = used; i < seqLen; ++i) {
      row.tokens.push_back(0);
      row.labels.push_back(kIgnoreLabel);
      row.positions.push_back(int32_t(i - used));
      row.segments.push_back(segment);
      row.attentionMask.push_back(0);
    }
    result.rows.push_back(std::move(row));
    row = Row();
    segment = 0;
  };
  for (const Example &example : examples) {
    int64_t length = std::min<int64_t>(example.inputIds.size(), seqLen);
    if (length < (int64_t)example.inputIds.size()) {
      ++result.truncatedExamples;
      result.truncatedTokens += example.inputIds.size() - length;
    }
    result.longestExample =
        std::max<int64_t>(result.longestExample, example.inputIds.size());
    // Label 0 is no position's next token.
    int64_t labels = 0, kept = 0;
    for (size_t i = 1; i < example.labels.size(); ++i)
      if (example.labels[i] != kIgnoreLabel) {
        ++labels;
        kept += int64_t(i) < length;
      }
    result.labelsKept += kept;
    result.labelsCut += labels - kept;
    if (!labels && !result.unlabelledExamples++)
      result.firstUnlabelledLine = example.line;
    if (!packed || (int64_t)row.tokens.size() + length > seqLen)
      finishRow();
    for (int64_t i = 0; i < length; ++i) {
      row.tokens.push_back(example.inputIds[i]);
      // Position i predicts the next token of its example.
      row.labels.push_back(i + 1 < length ? example.labels[i + 1]
                                          : kIgnoreLabel);
      row.positions.push_back(int32_t(i));
      row.segments.push_back(segment);
      row.attentionMask.push_back(1);
    }
    ++segment;
  }
  finishRow();
  return result;
}

llvm::Error twill::checkIds(llvm::ArrayRef<int32_t> ids, llvm::StringRef path,
                            int64_t line, llvm::StringRef what, int64_t vocab,
                            bool ignorable) {
  for (auto [position, id] : llvm::enumerate(ids))
    if ((id < 0 || id >= vocab) && !(ignorable && id == kIgnoreLabel))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}:{1}: {2} {3} at position {4} is outside the "
                        "model's vocabulary [0, {5})",
                        path, line, what, id, position, vocab));
  return llvm::Error::success();
}

llvm::Error twill::checkVocabulary(llvm::ArrayRef<Example> examples,
                                   llvm::StringRef path, int64_t vocab) {
  for (const Example &example : examples) {
    // Labels may also be the ignore index; token ids may not.
    if (llvm::Error error = checkIds(example.inputIds, path, example.line,
                                     "token id", vocab, /*ignorable=*/false))
      return error;
    if (llvm::Error error = checkIds(example.labels, path, example.line,
                                     "label", vocab, /*ignorable=*/true))
      return error;
  }
  return llvm::Error::success();
}
