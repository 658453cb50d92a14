//===- ReadFile.cpp - reading a file Twill did not write ------------------===//

#include "support/ReadFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
twill::readRegularFile(llvm::StringRef path, uint64_t maxBytes,
                       llvm::StringRef kind) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "cannot read " + (kind.empty() ? "" : kind + " ") + path + ": " + what);
  };
  llvm::sys::fs::file_status status;
  if (std::error_code error = llvm::sys::fs::status(path, status))
    return fail(error.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail(kNotRegularFile);
  if (status.getSize() > maxBytes)
    return fail(llvm::formatv("it holds {0} bytes, more than the {1} a file "
                              "of its kind may",
                              status.getSize(), maxBytes)
                    .str());
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail(file.getError().message());
  return std::move(*file);
}

bool twill::existsButIsNotRegular(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  return !llvm::sys::fs::status(path, status) &&
         status.type() != llvm::sys::fs::file_type::regular_file;
}
