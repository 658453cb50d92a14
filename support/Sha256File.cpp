//===- Sha256File.cpp - what a file holds, as a hash ----------------------===//

#include "support/Sha256File.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"

using namespace twill;

std::string twill::sha256Hex(llvm::StringRef bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)),
                     /*LowerCase=*/true);
}

llvm::Expected<std::string> twill::sha256OfFile(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return llvm::createStringError(file.getError(), "cannot read %s: %s",
                                   path.str().c_str(),
                                   file.getError().message().c_str());
  return sha256Hex((*file)->getBuffer());
}
