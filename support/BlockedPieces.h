//===- BlockedPieces.h - where a blocked split's pieces lie -----*- C++ -*-===//
//
// twill.split and twill.concat cut one dim into pieces. With `blocks` = k
// the dim is first k blocks of ceil(size / k) positions (the last ones
// shorter, or empty: the blocks a dim sharded k ways has), each block is
// cut into consecutive chunks, chunk i ceil(piece i / k) long, and piece i
// is chunk i of every block, in block order. With k = 1 the pieces are
// consecutive. When the dim is sharded over an axis of k ranks, each rank
// cuts its own block and nothing moves: a sequence-parallel layer is tiled
// before its all-gather, one tile gathered at a time.
//
// The compiler's verifier, the frontend and both backends read the layout
// from here, so they cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_BLOCKEDPIECES_H
#define TWILL_SUPPORT_BLOCKEDPIECES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace twill {

/// Consecutive positions shared by one piece and the whole.
struct PieceRun {
  int64_t piece;      // the piece's index
  int64_t wholeStart; // where the run starts in the whole
  int64_t pieceStart; // and in the piece
  int64_t length;
};

/// The runs, block by block and piece by piece within a block, that lay
/// pieces of sizes `pieces` over a dim of `whole` positions in `blocks`
/// blocks; an error says why the sizes do not fit that layout.
llvm::Expected<std::vector<PieceRun>>
blockedPieceRuns(int64_t whole, int64_t blocks, llvm::ArrayRef<int64_t> pieces);

/// The sizes of the pieces whose chunks within each block are `chunks` long
/// (which sum to ceil(whole / blocks)): what a tiling chooses, as types.
std::vector<int64_t> blockedPieceSizes(int64_t whole, int64_t blocks,
                                       llvm::ArrayRef<int64_t> chunks);

} // namespace twill

#endif // TWILL_SUPPORT_BLOCKEDPIECES_H
