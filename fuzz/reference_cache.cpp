// DPO's precomputed reference as the output folder keeps it: read for 2
// rows under fingerprint 7 (the seed's); what is read prints and reads
// back the same.
#include "fuzz/FuzzInput.h"
#include "runtime/data/ReferenceCache.h"

#include <cstdlib>

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto kept = parseReferenceCache(text, 2, 7);
  if (auto *read = fuzz::valueOrNull(kept)) {
    auto again = parseReferenceCache(
        printReferenceCache(read->values, 7, read->start), 2, 7);
    if (!again || again->values != read->values || again->start != read->start)
      std::abort(); // a cache that does not read back as written
  }
  return 0;
}
