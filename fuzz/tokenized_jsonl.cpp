// Tokenized JSONL ({"input_ids", "labels"} per line): read, checked against
// a 512-token vocabulary, packed and laid one per row.
#include "fuzz/FuzzInput.h"
#include "runtime/data/TokenizedDataset.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = fuzz::writeFile("train.jsonl", data, size);
  auto examples = readTokenizedJsonl(path);
  if (std::vector<Example> *read = fuzz::valueOrNull(examples)) {
    fuzz::ignore(checkVocabulary(*read, path, 512));
    packExamples(*read, 64, /*packed=*/true);
    packExamples(*read, 64, /*packed=*/false);
  }
  return 0;
}
