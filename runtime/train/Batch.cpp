//===- Batch.cpp - filling a step's inputs --------------------------------===//

#include "runtime/train/Batch.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <limits>

using namespace twill;
namespace json = llvm::json;

/// The int32 buffer of batch input `name`, checked to hold `count` values.
static llvm::Expected<int32_t *>
batchInput(Program &program, llvm::StringRef name, int64_t count) {
  int id = program.bufferOf(name);
  if (id < 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the program has no input '" + name + "'");
  const Buffer &buffer = program.buffers().info(id);
  if (buffer.dtype() != I32 || numElements(buffer) != count)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("'{0}' holds {1} values; the job needs {2} "
                      "(batch_size x seq_len)",
                      name, count, numElements(buffer)));
  return program.buffers().as<int32_t>(id);
}

llvm::Error twill::fillBatch(Program &program, llvm::ArrayRef<Row> rows) {
  int64_t seqLen = rows.empty() ? 0 : rows.front().tokens.size();
  for (auto [index, name] : llvm::enumerate(kBatchInputs)) {
    llvm::Expected<int32_t *> out =
        batchInput(program, name, rows.size() * seqLen);
    if (!out)
      return out.takeError();
    for (auto [r, row] : llvm::enumerate(rows)) {
      const std::vector<int32_t> *fields[] = {&row.tokens, &row.labels,
                                              &row.positions, &row.segments};
      std::copy(fields[index]->begin(), fields[index]->end(),
                *out + r * seqLen);
    }
  }
  return llvm::Error::success();
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
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return fail("cannot read: " + file.getError().message());
  llvm::Expected<json::Value> parsed = json::parse((*file)->getBuffer());
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  const json::Object *batch = parsed->getAsObject();
  if (!batch)
    return fail("expected a JSON object of inputs");

  for (llvm::StringRef name : kBatchInputs) {
    const json::Value *value = batch->get(name);
    if (!value)
      return fail("no '" + name + "'");
    std::vector<int64_t> values;
    if (!flatten(*value, values))
      return fail("'" + name + "' must hold only integers");
    llvm::Expected<int32_t *> out = batchInput(program, name, values.size());
    if (!out)
      return fail(llvm::toString(out.takeError()));
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < std::numeric_limits<int32_t>::min() ||
          values[i] > std::numeric_limits<int32_t>::max())
        return fail("'" + name + "' holds a value beyond int32");
      (*out)[i] = int32_t(values[i]);
    }
  }
  return llvm::Error::success();
}
