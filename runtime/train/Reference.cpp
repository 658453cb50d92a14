//===- Reference.cpp - DPO's precomputed reference ------------------------===//

#include "runtime/train/Reference.h"

#include "proto/TrainRows.h"
#include "runtime/data/ReferenceCache.h"
#include "runtime/train/Batch.h"
#include "support/AtomicFile.h"
#include "support/ReadFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

#include <chrono>

using namespace twill;

static llvm::Error referenceError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// What the reference of the program's rows is computed with: the base with
/// no adapter, the model, how its weights are held, and where they came
/// from (a random base is drawn from the seed).
static std::string baseDescription(const Program &program) {
  const JobConfig &job = program.job();
  std::string base = job.model().SerializeAsString() +
                     job.quantization().SerializeAsString() +
                     TrainConfig::Precision_Name(job.train().precision()) +
                     "\n" + program.baseCheckpoint().str();
  if (program.baseCheckpoint().empty())
    base += "\nrandom base, seed " + std::to_string(job.train().seed());
  return base;
}

/// Runs @reference on the batch the inputs hold: its batch_size x 2
/// log-probabilities, on every rank.
static llvm::Expected<llvm::ArrayRef<float>> runReference(Program &program) {
  const EntryPoint *reference = program.entryPoint(REFERENCE);
  if (!reference)
    return referenceError(
        "the executable has no reference entry point (dpo.reference "
        "PRECOMPUTED): compile it with this release's twillc");
  if (llvm::Error error = program.run(*reference))
    return std::move(error);
  int id = Program::outputOf(*reference, REFERENCE_LOGPS);
  int64_t count = 2 * program.job().train().batch_size();
  // The output is whole on every rank (a gathered batch may be padded past
  // its rows).
  if (id < 0 || numElements(program.buffers().info(id)) < count)
    return referenceError("the executable's reference entry point returns "
                          "no reference_logps of the batch");
  return llvm::ArrayRef<float>(program.buffers().as<float>(id), count);
}

llvm::Error twill::computeBatchReference(Program &program) {
  llvm::Expected<llvm::ArrayRef<float>> values = runReference(program);
  if (!values)
    return values.takeError();
  return fillReferenceLogps(program, *values);
}

/// Rank 0's reading of `cache`: what it keeps, or nothing (with why not,
/// where the file exists but holds no reference of these rows).
static std::optional<KeptReference> readCache(llvm::StringRef cache,
                                              int64_t rows,
                                              uint64_t fingerprint,
                                              llvm::raw_ostream &log) {
  if (cache.empty() || !llvm::sys::fs::exists(cache))
    return std::nullopt;
  auto file = readRegularFile(cache, maxReferenceCacheBytes(rows),
                              "the kept reference");
  llvm::Expected<KeptReference> kept =
      file ? parseReferenceCache((*file)->getBuffer(), rows, fingerprint)
           : llvm::Expected<KeptReference>(file.takeError());
  if (!kept) {
    log << cache << ": " << llvm::toString(kept.takeError()) << "\n";
    return std::nullopt;
  }
  return std::move(*kept);
}

/// The pairs of the rows `read` that `kept` holds, in order; none unless it
/// holds them all and was computed from `start` (any start, `resumed`).
static std::optional<std::vector<std::array<float, 2>>>
usable(const KeptReference &kept, llvm::ArrayRef<int64_t> read, uint64_t start,
       bool resumed, llvm::StringRef cache, llvm::raw_ostream &log) {
  if (!resumed && kept.start != start) {
    log << cache << ": computed from another starting model (--adapter)\n";
    return std::nullopt;
  }
  std::vector<std::array<float, 2>> values;
  for (int64_t row : read) {
    if (!kept.values[row]) {
      log << cache << ": holds no pair of row " << row + 1
          << ", which the run reads\n";
      return std::nullopt;
    }
    values.push_back(*kept.values[row]);
  }
  return values;
}

llvm::Error twill::precomputeReference(Program &program,
                                       llvm::MutableArrayRef<Row> rows,
                                       llvm::ArrayRef<int64_t> read,
                                       llvm::StringRef cache,
                                       llvm::StringRef start, bool resumed,
                                       llvm::raw_ostream &log) {
  auto began = std::chrono::steady_clock::now();
  uint64_t fingerprint = referenceFingerprint(rows, baseDescription(program));
  uint64_t startHash = llvm::xxh3_64bits(start);
  // Rank 0 reads the cache, and every rank takes what it found: the ranks
  // agree whether to run @reference even where they see different files.
  std::vector<std::array<float, 2>> values;
  if (program.writesFiles())
    if (auto kept = readCache(cache, rows.size(), fingerprint, log))
      if (auto found = usable(*kept, read, startHash, resumed, cache, log))
        values = std::move(*found);
  int64_t found = !values.empty() || read.empty();
  if (llvm::Error error = program.broadcastFromFirst(&found, sizeof(found)))
    return error;
  int64_t count = read.size();
  if (found) {
    values.resize(count);
    if (llvm::Error error = program.broadcastFromFirst(
            values.data(), values.size() * sizeof(values[0])))
      return error;
    for (auto [row, pair] : llvm::zip_equal(read, values))
      rows[row].reference = pair;
    log << llvm::formatv("reference log-probabilities of {0} pairs: read "
                         "from {1}\n",
                         count, cache);
    return llvm::Error::success();
  }
  // The reference is the model as the first run started: a resumed run's
  // parameters are trained.
  if (resumed)
    return referenceError(
        cache + " holds no reference of the pairs this run reads (said "
                "above, or it is missing): a resumed run's reference is the "
                "model its first run started from, which only that run's "
                "pass kept; start the run again");
  if (program.writesFiles() && !cache.empty() && llvm::sys::fs::exists(cache))
    log << cache << ": computing the reference again\n";

  const TrainConfig &settings = program.job().train();
  int64_t batchSize = settings.batch_size(), seqLen = rowLength(settings);
  int64_t batches = (count + batchSize - 1) / batchSize;
  for (int64_t index = 0; index < batches; ++index) {
    std::vector<Row> batch = microBatch(rows, read, index, batchSize, seqLen);
    // @reference reads no reference of its own.
    for (Row &row : batch)
      row.reference = {0.0f, 0.0f};
    if (llvm::Error error = fillBatch(program, batch))
      return error;
    llvm::Expected<llvm::ArrayRef<float>> logps = runReference(program);
    if (!logps)
      return logps.takeError();
    llvm::ArrayRef<int64_t> chosen = read.slice(
        index * batchSize, std::min(batchSize, count - index * batchSize));
    for (auto [r, row] : llvm::enumerate(chosen))
      rows[row].reference = {(*logps)[2 * r], (*logps)[2 * r + 1]};
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  log << llvm::formatv(
      "reference log-probabilities of {0}: computed in {1:f1} s ({2} "
      "batches of @reference){3}\n",
      count == (int64_t)rows.size()
          ? llvm::formatv("{0} pairs", count).str()
          : llvm::formatv("the {0} of the {1} pairs the run reads", count,
                          rows.size())
                .str(),
      seconds, batches, cache.empty() ? "" : ", kept in " + cache.str());
  if (cache.empty() || !program.writesFiles())
    return llvm::Error::success();
  // A resumed run reads what this one does: the pairs it computed.
  std::vector<KeptPair> kept(rows.size());
  for (int64_t row : read)
    kept[row] = rows[row].reference;
  return writeFileAtomically(cache, [&](llvm::raw_ostream &os) {
    os << printReferenceCache(kept, fingerprint, startHash);
  });
}
