#include "fuzz/FuzzInput.h"

#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

using namespace twill;

const std::string &fuzz::scratchDir() {
  static const std::string dir = [] {
    llvm::SmallString<128> path;
    if (std::error_code error =
            llvm::sys::fs::createUniqueDirectory("twill-fuzz", path)) {
      std::fprintf(stderr, "cannot make a scratch folder: %s\n",
                   error.message().c_str());
      std::abort();
    }
    return std::string(path);
  }();
  // Registered after `dir` is made, so run before it is destroyed.
  static const bool removedAtExit = !std::atexit(
      [] { llvm::sys::fs::remove_directories(scratchDir()); });
  (void)removedAtExit;
  return dir;
}

std::string fuzz::writeFile(llvm::StringRef name, const uint8_t *data,
                            size_t size) {
  std::string path = scratchDir() + "/" + name.str();
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  if (!error) {
    out.write(reinterpret_cast<const char *>(data), size);
    out.close();
    error = out.error();
  }
  if (error) {
    // Not a finding of the loader under test: stop loudly rather than fuzz
    // a stale file.
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(),
                 error.message().c_str());
    std::abort();
  }
  return path;
}

const std::string &fuzz::byteTokenizerPath() {
  static const std::string path = [] {
    std::string text;
    for (int byte = 0; byte < 256; ++byte)
      text += llvm::encodeBase64(std::string(1, char(byte))) + " " +
              std::to_string(byte) + "\n";
    return writeFile("bytes.model", text);
  }();
  return path;
}
