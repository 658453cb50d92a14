// Pre-tokenized preference pairs ({"prompt_ids", "chosen_ids",
// "rejected_ids"} per line): read, the fully truncated dropped, laid out as
// DPO's rows.
#include "fuzz/FuzzInput.h"
#include "runtime/data/PreferenceDataset.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = fuzz::writeFile("pairs.jsonl", data, size);
  auto pairs = readTokenizedPairs(path);
  if (auto *read = fuzz::valueOrNull(pairs); read && read->has_value()) {
    dropFullyTruncated(**read, 16);
    pairRows(**read, 16);
  }
  return 0;
}
