//===- TwillTraits.h - what passes know of an op by its kind ----*- C++ -*-===//
//
// The C++ of the traits TwillInterfaces.td declares: each only marks its
// ops, whose ODS entries name it, and passes ask `op->hasTrait<...>()`
// rather than keep lists of ops.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_DIALECTS_TWILL_TWILLTRAITS_H
#define TWILL_DIALECTS_TWILL_TWILLTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::OpTrait::twill {

template <typename ConcreteType>
class Costly : public TraitBase<ConcreteType, Costly> {};

template <typename ConcreteType>
class Multilinear : public TraitBase<ConcreteType, Multilinear> {};

template <typename ConcreteType>
class Additive : public TraitBase<ConcreteType, Additive> {};

template <typename ConcreteType>
class Dequantize : public TraitBase<ConcreteType, Dequantize> {};

template <typename ConcreteType>
class Fp32Sums : public TraitBase<ConcreteType, Fp32Sums> {};

template <typename ConcreteType>
class ElementwiseInPlace : public TraitBase<ConcreteType, ElementwiseInPlace> {
};

} // namespace mlir::OpTrait::twill

#endif // TWILL_DIALECTS_TWILL_TWILLTRAITS_H
