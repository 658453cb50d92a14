//===- Batch.cpp - one step's inputs from a JSON file ---------------------===//

#include "runtime/train/Batch.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <limits>

using namespace twill;
namespace json = llvm::json;

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

llvm::Error twill::loadBatchJson(llvm::StringRef path,
                                 const Executable &executable,
                                 BufferSet &buffers) {
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

  for (const Input &input : executable.inputs()) {
    const Buffer &buffer = buffers.info(input.buffer());
    const json::Value *value = batch->get(input.name());
    if (!value)
      return fail("no '" + input.name() + "'");
    std::vector<int64_t> values;
    if (!flatten(*value, values))
      return fail("'" + input.name() + "' must hold only integers");
    if ((int64_t)values.size() != numElements(buffer))
      return fail(llvm::formatv("'{0}' holds {1} values; the job needs {2} "
                                "(batch_size x seq_len)",
                                input.name(), values.size(),
                                numElements(buffer)));
    if (buffer.dtype() != I32)
      return fail("input '" + input.name() + "' is not int32");
    int32_t *out = buffers.as<int32_t>(input.buffer());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < std::numeric_limits<int32_t>::min() ||
          values[i] > std::numeric_limits<int32_t>::max())
        return fail("'" + input.name() + "' holds a value beyond int32");
      out[i] = int32_t(values[i]);
    }
  }
  return llvm::Error::success();
}
