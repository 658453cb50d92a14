// The job config loader: a textproto job, then (after a line "--") one
// key=value override per line, as twillc's command line gives them.
#include "frontend/config/JobConfig.h"
#include "fuzz/FuzzInput.h"

#include "llvm/ADT/StringExtras.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  auto [job, rest] = input.split("\n--\n");
  std::vector<std::string> overrides;
  llvm::SmallVector<llvm::StringRef> lines;
  rest.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines)
    overrides.push_back(line.str());
  llvm::Expected<JobConfig> config =
      loadJobConfig(fuzz::writeFile("job.textproto", job), overrides);
  fuzz::valueOrNull(config);
  return 0;
}
