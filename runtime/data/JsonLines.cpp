//===- JsonLines.cpp - reading a JSONL file line by line ------------------===//

#include "runtime/data/JsonLines.h"

#include "support/ReadFile.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

llvm::Error twill::readJsonLines(
    llvm::StringRef path,
    llvm::function_ref<llvm::Error(const llvm::json::Object &,
                                   llvm::StringRef text, int64_t line)>
        read) {
  auto file = readRegularFile(path, kMaxDataBytes);
  if (!file)
    return file.takeError();
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  for (auto [index, text] : llvm::enumerate(lines)) {
    auto fail = [&, index = index](const llvm::Twine &what) {
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}:{1}: ", path, index + 1).str() + what);
    };
    if (text.trim().empty())
      continue;
    // Parsed, a line takes many times its size: bounded before parsing.
    if (text.size() > kMaxJsonLineBytes)
      return fail(llvm::formatv("a line of {0} bytes, longer than the {1} "
                                "one example may be",
                                text.size(), kMaxJsonLineBytes)
                      .str());
    // One example's objects are a conversation's messages, at most.
    constexpr int64_t kMaxExampleObjects = int64_t(1) << 16;
    llvm::Expected<llvm::json::Value> parsed =
        parseJson(text, llvm::formatv("{0}:{1}", path, index + 1),
                  kMaxExampleObjects);
    if (!parsed)
      return parsed.takeError();
    const llvm::json::Object *line = parsed->getAsObject();
    if (!line)
      return fail("expected a JSON object");
    if (llvm::Error error = read(*line, text, int64_t(index) + 1))
      return fail(llvm::toString(std::move(error)));
  }
  return llvm::Error::success();
}
