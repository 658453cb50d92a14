//===- AtomicFile.cpp - files that are whole or absent --------------------===//

#include "support/AtomicFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace twill;

llvm::Error twill::writeFileAtomically(
    llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> write) {
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

/// `path` made absolute, its links and dots resolved as far as it exists,
/// the rest as written.
static llvm::SmallString<256> resolvedPath(llvm::StringRef path) {
  llvm::SmallString<256> existing(path), resolved;
  llvm::sys::fs::make_absolute(existing);
  llvm::sys::path::remove_dots(existing);
  llvm::SmallVector<std::string> rest;
  while (llvm::sys::path::has_parent_path(existing) &&
         !llvm::sys::fs::exists(existing)) {
    rest.push_back(llvm::sys::path::filename(existing).str());
    llvm::sys::path::remove_filename(existing);
  }
  if (llvm::sys::fs::real_path(existing, resolved))
    resolved = existing;
  for (const std::string &name : llvm::reverse(rest))
    llvm::sys::path::append(resolved, name);
  llvm::sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
  return resolved;
}

llvm::Error twill::checkNotInFolder(llvm::StringRef flag,
                                    llvm::StringRef output,
                                    llvm::StringRef what,
                                    llvm::StringRef input) {
  if (output.empty() || input.empty())
    return llvm::Error::success();
  llvm::SmallString<256> inside = resolvedPath(output),
                         folder = resolvedPath(input);
  bool same = inside == folder;
  if (!same && !(llvm::StringRef(inside).starts_with(folder) &&
                 llvm::sys::path::is_separator(inside[folder.size()])))
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      flag + " " + output + (same ? " is " : " lies inside ") + what + " " +
          input +
          ", which this command reads: writing there would replace or mix "
          "with it; give another folder");
}
