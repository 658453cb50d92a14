//===- StoredTensors.cpp - the tensors parameters make up -----------------===//

#include "runtime/executable/StoredTensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;

const std::string &twill::storedTensorName(const Parameter &parameter) {
  return parameter.has_stored() ? parameter.stored().tensor()
                                : parameter.name();
}

int64_t twill::storedFirstRow(const Parameter &parameter) {
  return parameter.has_stored() ? parameter.stored().first_row() : 0;
}

static llvm::Error inconsistent(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "invalid executable: " + what);
}

/// The whole shape of `parameter`'s buffer, over every rank; a quantized
/// weight's codes, the weight's (two codes a byte; a mixture of experts'
/// rows as its [experts, rows / experts, columns]).
static std::vector<int64_t> wholeShape(const Executable &executable,
                                       const Parameter &parameter) {
  const Buffer &buffer = executable.buffers(parameter.buffer());
  const auto &shape =
      buffer.global_shape().empty() ? buffer.shape() : buffer.global_shape();
  std::vector<int64_t> whole(shape.begin(), shape.end());
  const QuantizedRole &role = parameter.quantized();
  if (role.part() == QuantizedRole::CODES && !whole.empty())
    whole.back() *= 2;
  if (standsForWeight(role) && role.experts() > 0 && whole.size() == 2 &&
      whole[0] % role.experts() == 0)
    whole = {role.experts(), whole[0] / role.experts(), whole[1]};
  return whole;
}

llvm::Expected<std::vector<StoredTensor>>
twill::storedTensors(const Executable &executable) {
  std::vector<StoredTensor> tensors;
  llvm::StringMap<size_t> index;
  for (const Parameter &parameter : executable.parameters()) {
    if (parameter.buffer() < 0 ||
        parameter.buffer() >= executable.buffers_size())
      return inconsistent("parameter '" + parameter.name() +
                          "' has a bad buffer");
    // A quantized weight is the tensor its codes (or FP8 values) stand
    // for; its scales are its format's, no tensor of the model.
    if (parameter.has_quantized() && !standsForWeight(parameter.quantized()))
      continue;
    auto [it, added] =
        index.try_emplace(storedTensorName(parameter), tensors.size());
    if (added)
      tensors.push_back({storedTensorName(parameter), {}, {}});
    tensors[it->second].pieces.push_back(&parameter);
  }
  for (StoredTensor &tensor : tensors) {
    const Parameter &any = *tensor.pieces.front();
    tensor.shape = wholeShape(executable, any);
    if (tensor.pieces.size() == 1 && !any.has_stored())
      continue;
    for (const Parameter *piece : tensor.pieces)
      if (!piece->has_stored())
        return inconsistent("parameter '" + piece->name() +
                            "' is a whole tensor, and other parameters are "
                            "stored in it");
    llvm::stable_sort(tensor.pieces,
                      [](const Parameter *a, const Parameter *b) {
                        return storedFirstRow(*a) < storedFirstRow(*b);
                      });
    const Parameter &first = *tensor.pieces.front();
    // Blocks of rows, end to end from row 0 to the tensor's last.
    int64_t row = 0;
    for (const Parameter *piece : tensor.pieces) {
      std::vector<int64_t> shape = wholeShape(executable, *piece);
      bool sameRest =
          shape.size() == tensor.shape.size() && !shape.empty() &&
          std::equal(shape.begin() + 1, shape.end(), tensor.shape.begin() + 1);
      bool sameRole = piece->has_adapter() == first.has_adapter() &&
                      piece->adapter().part() == first.adapter().part() &&
                      piece->adapter().of() == first.adapter().of();
      if (storedFirstRow(*piece) != row || !sameRest || !sameRole ||
          piece->stored().tensor_rows() != first.stored().tensor_rows())
        return inconsistent(llvm::formatv(
            "parameter '{0}' is not the block of tensor '{1}' from row {2} "
            "on, of the others' dims and role",
            piece->name(), tensor.name, row));
      row += shape[0];
    }
    if (row != first.stored().tensor_rows())
      return inconsistent(llvm::formatv(
          "the parameters stored in tensor '{0}' cover {1} of its {2} rows",
          tensor.name, row, first.stored().tensor_rows()));
    tensor.shape[0] = row;
  }
  return tensors;
}
