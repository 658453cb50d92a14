//===- BlockedPieces.cpp - where a blocked split's pieces lie -------------===//

#include "support/BlockedPieces.h"

#include <algorithm>

using namespace twill;

/// Calls `run` for each non-empty run of the layout whose chunks within a
/// block are `chunks` long.
template <typename Run>
static void forEachRun(int64_t whole, int64_t blocks,
                       llvm::ArrayRef<int64_t> chunks, Run run) {
  int64_t block = (whole + blocks - 1) / blocks;
  std::vector<int64_t> filled(chunks.size(), 0);
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t start = b * block, end = std::min(start + block, whole);
    for (size_t piece = 0; piece < chunks.size(); ++piece) {
      int64_t length = std::min(chunks[piece], std::max<int64_t>(end - start, 0));
      if (length > 0) {
        run(PieceRun{int64_t(piece), start, filled[piece], length});
        filled[piece] += length;
      }
      start += chunks[piece];
    }
  }
}

llvm::Expected<std::vector<PieceRun>>
twill::blockedPieceRuns(int64_t whole, int64_t blocks,
                        llvm::ArrayRef<int64_t> pieces) {
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  if (blocks < 1)
    return fail("blocks " + llvm::Twine(blocks) + " is not positive");
  std::vector<int64_t> chunks;
  int64_t covered = 0;
  for (int64_t size : pieces) {
    if (size < 0)
      return fail("a piece of " + llvm::Twine(size) + " positions");
    chunks.push_back((size + blocks - 1) / blocks);
    covered += chunks.back();
  }
  int64_t block = (whole + blocks - 1) / blocks;
  if (covered != block && blocks == 1)
    return fail("pieces cover " + llvm::Twine(covered) + " of " +
                llvm::Twine(whole) + " positions");
  if (covered != block)
    return fail("pieces' chunks cover " + llvm::Twine(covered) +
                " of each block's " + llvm::Twine(block) + " positions (" +
                llvm::Twine(blocks) + " blocks of " + llvm::Twine(whole) +
                ")");
  std::vector<PieceRun> runs;
  std::vector<int64_t> sizes(pieces.size(), 0);
  forEachRun(whole, blocks, chunks, [&](const PieceRun &run) {
    runs.push_back(run);
    sizes[run.piece] += run.length;
  });
  for (size_t piece = 0; piece < pieces.size(); ++piece)
    if (sizes[piece] != pieces[piece])
      return fail("piece " + llvm::Twine(piece) + " has " +
                  llvm::Twine(pieces[piece]) + " positions, its chunks " +
                  llvm::Twine(sizes[piece]));
  return runs;
}

std::vector<int64_t> twill::blockedPieceSizes(int64_t whole, int64_t blocks,
                                              llvm::ArrayRef<int64_t> chunks) {
  std::vector<int64_t> sizes(chunks.size(), 0);
  forEachRun(whole, blocks, chunks,
             [&](const PieceRun &run) { sizes[run.piece] += run.length; });
  return sizes;
}
