//===- Batch.cpp - filling a step's inputs --------------------------------===//

#include "runtime/train/Batch.h"

#include "runtime/data/JsonLines.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <type_traits>

using namespace twill;
namespace json = llvm::json;

/// Fills the batch input that is `role` with this rank's block of `whole`
/// (the batch, batch_size x `perRow` values: seq_len, or 2 for the
/// reference's log-probabilities); rows past the batch (when batch_size
/// does not divide over dp) are padding with no labels.
template <typename T>
static llvm::Error fillInput(Program &program, ValueRole role,
                             llvm::ArrayRef<T> whole,
                             llvm::StringRef perRow = "seq_len") {
  std::string name = llvm::StringRef(ValueRole_Name(role)).lower();
  int id = program.inputOf(role);
  if (id < 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the program has no input '" + name + "'");
  const Buffer &buffer = program.buffers().info(id);
  llvm::Expected<BufferBlock> block = program.block(id);
  if (!block)
    return block.takeError();
  int64_t count = 1;
  for (int64_t size : block->globalShape)
    count *= size;
  DType dtype = std::is_same_v<T, float> ? F32 : I32;
  if (buffer.dtype() != dtype || (int64_t)whole.size() != count)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("'{0}' holds {1} values; the job needs {2} "
                      "(batch_size x {3})",
                      name, whole.size(), count, perRow));
  T pad = role == LABELS ? kIgnoreLabel : 0;
  sliceBlock<T>(whole, *block,
                llvm::MutableArrayRef<T>(program.buffers().as<T>(id),
                                         numElements(buffer)),
                pad);
  return llvm::Error::success();
}

llvm::Error twill::fillReferenceLogps(Program &program,
                                      llvm::ArrayRef<float> whole) {
  return fillInput(program, REFERENCE_LOGPS, whole, "2");
}

/// With LoRA dropout, the program reads each position's index in the
/// batch (row x seq_len + position), which its mask is keyed by.
static llvm::Error fillTokenIndex(Program &program, int64_t positions) {
  if (program.inputOf(TOKEN_INDEX) < 0)
    return llvm::Error::success();
  std::vector<int32_t> index(positions);
  std::iota(index.begin(), index.end(), 0);
  return fillInput<int32_t>(program, TOKEN_INDEX, index);
}

std::vector<Row> twill::microBatch(llvm::ArrayRef<Row> rows,
                                   llvm::ArrayRef<int64_t> order, int64_t index,
                                   int64_t batchSize, int64_t seqLen) {
  int64_t count = order.empty() ? rows.size() : order.size();
  std::vector<Row> batch;
  for (int64_t i = index * batchSize; i < (index + 1) * batchSize; ++i) {
    if (i >= count)
      batch.push_back(paddingRow(seqLen));
    else
      batch.push_back(rows[order.empty() ? i : order[i]]);
  }
  return batch;
}

int64_t twill::countedPairs(llvm::ArrayRef<Row> rows) {
  int64_t counted = 0;
  for (const Row &row : rows) {
    bool labelled[2] = {false, false};
    for (auto [label, segment] : llvm::zip_equal(row.labels, row.segments))
      if (label >= 0 && (segment == 0 || segment == 1))
        labelled[segment] = true;
    counted += labelled[0] && labelled[1];
  }
  return counted;
}

/// The labels among `labels` a loss is trained on.
static int64_t labelledIn(llvm::ArrayRef<int32_t> labels) {
  return llvm::count_if(labels,
                        [](int32_t label) { return label != kIgnoreLabel; });
}

int64_t twill::labelledTokens(llvm::ArrayRef<Row> rows) {
  int64_t labelled = 0;
  for (const Row &row : rows)
    labelled += labelledIn(row.labels);
  return labelled;
}

void twill::setStepTokens(Program &program, int64_t tokens) {
  if (int id = program.inputOf(STEP_TOKENS); id >= 0)
    *program.buffers().as<float>(id) = float(tokens);
}

llvm::Error twill::fillBatch(Program &program, llvm::ArrayRef<Row> rows) {
  int64_t seqLen = rows.empty() ? 0 : rows.front().tokens.size();
  for (auto [index, role] : llvm::enumerate(kBatchInputs)) {
    std::vector<int32_t> whole;
    whole.reserve(rows.size() * seqLen);
    for (const Row &row : rows) {
      const std::vector<int32_t> *fields[] = {&row.tokens, &row.labels,
                                              &row.positions, &row.segments};
      whole.insert(whole.end(), fields[index]->begin(), fields[index]->end());
    }
    if (llvm::Error error = fillInput<int32_t>(program, role, whole))
      return error;
  }
  if (program.inputOf(ATTENTION_MASK) >= 0) {
    std::vector<int32_t> mask;
    mask.reserve(rows.size() * seqLen);
    for (const Row &row : rows)
      mask.insert(mask.end(), row.attentionMask.begin(),
                  row.attentionMask.end());
    if (llvm::Error error = fillInput<int32_t>(program, ATTENTION_MASK, mask))
      return error;
  }
  if (program.inputOf(REFERENCE_LOGPS) >= 0) {
    std::vector<float> reference;
    for (const Row &row : rows) {
      if (!row.reference)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "the program reads the reference's log-probabilities of each "
            "row (dpo.reference PRECOMPUTED), and these rows have none: "
            "compute them first (precomputeReference)");
      reference.insert(reference.end(), row.reference->begin(),
                       row.reference->end());
    }
    if (llvm::Error error = fillReferenceLogps(program, reference))
      return error;
  }
  return fillTokenIndex(program, rows.size() * seqLen);
}

/// Appends the integers of a (nested) array to `values`.
static bool flatten(const json::Value &value, std::vector<int64_t> &values) {
  if (const json::Array *array = value.getAsArray()) {
    for (const json::Value &element : *array)
      if (!flatten(element, values))
        return false;
    return true;
  }
  std::optional<int64_t> integer = value.getAsInteger();
  if (!integer)
    return false;
  values.push_back(*integer);
  return true;
}

llvm::Error twill::loadBatchJson(Program &program, llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + what);
  };
  llvm::Expected<json::Value> parsed = readJsonFile(path);
  if (!parsed)
    return parsed.takeError();
  const json::Object *batch = parsed->getAsObject();
  if (!batch)
    return fail("expected a JSON object of inputs");

  // Each input's values, as int32.
  auto read = [&](llvm::StringRef name,
                  std::vector<int32_t> &whole) -> llvm::Error {
    std::vector<int64_t> values;
    if (!flatten(*batch->get(name), values))
      return fail("'" + name + "' must hold only integers");
    for (int64_t value : values) {
      if (value < std::numeric_limits<int32_t>::min() ||
          value > std::numeric_limits<int32_t>::max())
        return fail("'" + name + "' holds a value beyond int32");
      whole.push_back(int32_t(value));
    }
    return llvm::Error::success();
  };
  int64_t positions = 0, labelled = 0;
  for (auto [role, name] : llvm::zip_equal(kBatchInputs, kBatchKeys)) {
    if (!batch->get(name))
      return fail("no '" + name + "'");
    std::vector<int32_t> whole;
    if (llvm::Error error = read(name, whole))
      return error;
    if (llvm::Error error = fillInput<int32_t>(program, role, whole))
      return fail(llvm::toString(std::move(error)));
    positions = whole.size();
    if (role == LABELS)
      labelled = labelledIn(whole);
  }
  if (program.inputOf(ATTENTION_MASK) >= 0) {
    std::vector<int32_t> mask;
    if (!batch->get("attention_mask"))
      mask.assign(positions, 1);
    else if (llvm::Error error = read("attention_mask", mask))
      return error;
    if (llvm::Error error = fillInput<int32_t>(program, ATTENTION_MASK, mask))
      return fail(llvm::toString(std::move(error)));
  }
  setStepTokens(program, labelled);
  return fillTokenIndex(program, positions);
}
