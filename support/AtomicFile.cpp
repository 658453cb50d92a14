//===- AtomicFile.cpp - files that are whole or absent --------------------===//

#include "support/AtomicFile.h"

#include "llvm/Support/FileSystem.h"

using namespace twill;

llvm::Error
twill::writeFileAtomically(llvm::StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": cannot write: " + why);
  };
  // Renaming over a device or a FIFO would replace it (/dev/null, for
  // root) with the file.
  if (llvm::sys::fs::exists(path) && !llvm::sys::fs::is_regular_file(path) &&
      !llvm::sys::fs::is_directory(path))
    return fail("it is not a regular file (a device or a FIFO): give the "
                "path of a file");
  llvm::Expected<llvm::sys::fs::TempFile> temp =
      llvm::sys::fs::TempFile::create(path + "-%%%%%%.tmp");
  if (!temp)
    return fail(llvm::toString(temp.takeError()));
  {
    llvm::raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
    write(os);
    os.flush();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      llvm::consumeError(temp->discard());
      return fail(message);
    }
  }
  if (llvm::Error error = temp->keep(path))
    return fail(llvm::toString(std::move(error)));
  return llvm::Error::success();
}

llvm::Error twill::checkNotAnInput(llvm::StringRef flag, llvm::StringRef output,
                                   llvm::ArrayRef<llvm::StringRef> inputs) {
  for (llvm::StringRef input : inputs) {
    bool same = false;
    if (input.empty() || output.empty() ||
        llvm::sys::fs::equivalent(input, output, same) || !same)
      continue;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        flag + " " + output + " is " + input +
            ", which this command reads: writing it would destroy it; give "
            "another path");
  }
  return llvm::Error::success();
}
