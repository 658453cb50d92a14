//===- TwillAttrs.h - placements and tensor-parallel styles -----*- C++ -*-===//

#ifndef TWILL_DIALECTS_TWILL_TWILLATTRS_H
#define TWILL_DIALECTS_TWILL_TWILLATTRS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TensorEncoding.h"

namespace mlir::twill {

/// How one mesh axis holds a tensor: `shard<dim>`, `replicate` or
/// `partial<sum>` (each device holds a summand of the value).
struct AxisPlacement {
  enum class Kind : uint8_t { Replicate, Shard, PartialSum };

  Kind kind = Kind::Replicate;
  /// The tensor dim split over the axis; meaningful for Kind::Shard only.
  int64_t dim = 0;

  static AxisPlacement replicate() { return {Kind::Replicate, 0}; }
  static AxisPlacement shard(int64_t dim) { return {Kind::Shard, dim}; }
  static AxisPlacement partialSum() { return {Kind::PartialSum, 0}; }

  bool isShard() const { return kind == Kind::Shard; }
  bool operator==(const AxisPlacement &other) const {
    return kind == other.kind && (kind != Kind::Shard || dim == other.dim);
  }
};

llvm::hash_code hash_value(const AxisPlacement &placement);
llvm::raw_ostream &operator<<(llvm::raw_ostream &os,
                              const AxisPlacement &placement);

/// Checks, for every placement in `op`'s operand and result types, that its
/// mesh exists and has one axis per placement entry.
LogicalResult verifyPlacementSymbols(Operation *op,
                                     SymbolTableCollection &symbolTable);

/// That the dims a collective (or its start) names are its input's.
LogicalResult verifyCollectiveDims(Operation *op);

/// verifyPlacementSymbols, and that a collective's mesh has its axis and
/// its result has the shape the axis size gives.
LogicalResult verifyCollective(Operation *op,
                               SymbolTableCollection &symbolTable);

} // namespace mlir::twill

#include "dialects/twill/TwillEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/twill/TwillAttrs.h.inc"

#endif // TWILL_DIALECTS_TWILL_TWILLATTRS_H
