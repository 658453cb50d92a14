//===- JsonLines.cpp - reading a JSONL file line by line ------------------===//

#include "runtime/data/JsonLines.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

llvm::Error twill::readJsonLines(
    llvm::StringRef path,
    llvm::function_ref<llvm::Error(const llvm::json::Object &, int64_t line)>
        read) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(file.getError(), "cannot read %s: %s",
                                   path.str().c_str(),
                                   file.getError().message().c_str());
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
    llvm::Expected<llvm::json::Value> parsed =
        parseJson(text, llvm::formatv("{0}:{1}", path, index + 1));
    if (!parsed)
      return parsed.takeError();
    const llvm::json::Object *line = parsed->getAsObject();
    if (!line)
      return fail("expected a JSON object");
    if (llvm::Error error = read(*line, int64_t(index) + 1))
      return fail(llvm::toString(std::move(error)));
  }
  return llvm::Error::success();
}
