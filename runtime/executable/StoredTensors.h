//===- StoredTensors.h - the tensors parameters make up ---------*- C++ -*-===//
//
// A parameter is a whole tensor of the checkpoint (its name), or some rows
// of one (Parameter.stored: a block of a fused projection); a quantized
// weight is the tensor its codes stand for, of the weight's shape (its
// other parts are its format's). Reading, writing and merging go by the
// checkpoint's tensors; these put them together from the parameters.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_STOREDTENSORS_H
#define TWILL_RUNTIME_EXECUTABLE_STOREDTENSORS_H

#include "proto/executable.pb.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace twill {

/// Whether a quantized weight's part `role` stands for the weight (is the
/// checkpoint tensor, and carries the weight's start): NF4's codes, FP8's
/// values; its other parts are its format's.
inline bool standsForWeight(const QuantizedRole &role) {
  return role.part() == QuantizedRole::CODES ||
         role.part() == QuantizedRole::FP8_VALUES;
}

/// The checkpoint's name of the tensor holding `parameter`.
const std::string &storedTensorName(const Parameter &parameter);
/// The row of that tensor where the parameter starts (0 for a whole one).
int64_t storedFirstRow(const Parameter &parameter);

/// A tensor of the checkpoint and the parameters making it up, in row
/// order: one, or the blocks that cover its rows.
struct StoredTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<const Parameter *> pieces;
};

/// The tensors `executable`'s parameters make up, in the order of their
/// first parameters; fails, naming it, unless each tensor's blocks cover
/// its rows once, agree on the other dims, and are one adapter part of one
/// weight (or base weights alike).
llvm::Expected<std::vector<StoredTensor>>
storedTensors(const Executable &executable);

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_STOREDTENSORS_H
