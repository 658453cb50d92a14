//===- EmitExecutable.cpp - the twill-emit-executable pass ----------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "google/protobuf/text_format.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::twill {
#define GEN_PASS_DEF_EMITEXECUTABLE
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using ::twill::Executable;

namespace {

/// Builds one Executable; values become buffers as they are first seen.
class ExecutableEmitter {
public:
  LogicalResult emitFunction(func::FuncOp function);
  void emitMesh(mlir::twill::MeshOp mesh) {
    ::twill::Mesh &out = *executable.add_meshes();
    out.set_name(mesh.getSymName().str());
    for (Attribute axis : mesh.getAxes())
      out.add_axes(cast<StringAttr>(axis).str());
    for (int64_t size : mesh.getAxisSizes())
      out.add_shape(size);
  }
  Executable take() { return std::move(executable); }

private:
  FailureOr<int> newBuffer(Value value, Operation *where);
  FailureOr<int> sharedBuffer(BlockArgument argument, func::FuncOp function,
                              StringRef name, bool &isNew);
  LogicalResult emitArgument(BlockArgument argument, func::FuncOp function);
  LogicalResult emitAttribute(Operation *op, NamedAttribute attribute,
                              ::twill::Instruction &instruction);

  Executable executable;
  llvm::DenseMap<Value, int> buffers;
  llvm::StringMap<int> sharedBuffers; // parameters, states and inputs
};

} // namespace

/// The whole shape of a value split over the mesh and the dim each mesh
/// axis splits, from its placed type.
static void recordSplit(RankedTensorType type, ::twill::Buffer &buffer) {
  for (int64_t dim : type.getShape())
    buffer.add_global_shape(dim);
  if (auto placement =
          dyn_cast_or_null<mlir::twill::PlacementAttr>(type.getEncoding()))
    for (mlir::twill::AxisPlacement axis : placement.getAxes())
      buffer.add_split_dims(axis.isShard() ? axis.dim : -1);
}

static std::optional<::twill::DType> dtypeOf(Type type) {
  if (type.isF32())
    return ::twill::F32;
  if (type.isBF16())
    return ::twill::BF16;
  if (type.isF16())
    return ::twill::F16;
  if (type.isSignlessInteger(32))
    return ::twill::I32;
  if (type.isSignlessInteger(64))
    return ::twill::I64;
  return std::nullopt;
}

FailureOr<int> ExecutableEmitter::newBuffer(Value value, Operation *where) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return where->emitError("cannot emit a value of type ")
           << value.getType() << ": buffers need static tensor shapes";
  if (type.getEncoding())
    return where->emitError("cannot emit a value with a placement (")
           << type << "): partition the program first";
  std::optional<::twill::DType> dtype = dtypeOf(type.getElementType());
  if (!dtype)
    return where->emitError("cannot emit element type ")
           << type.getElementType();
  ::twill::Buffer &buffer = *executable.add_buffers();
  buffer.set_dtype(*dtype);
  for (int64_t dim : type.getShape())
    buffer.add_shape(dim);
  buffer.set_size_bytes(type.getNumElements() *
                        (type.getElementTypeBitWidth() / 8));
  if (auto name = dyn_cast<NameLoc>(value.getLoc()))
    buffer.set_name(name.getName().str());
  int id = executable.buffers_size() - 1;
  buffers[value] = id;
  return id;
}

/// The buffer of a parameter or state named `name`: one for the program,
/// whichever entry points read it; `isNew` tells whether it was just made.
FailureOr<int> ExecutableEmitter::sharedBuffer(BlockArgument argument,
                                               func::FuncOp function,
                                               StringRef name, bool &isNew) {
  auto [it, inserted] = sharedBuffers.try_emplace(name, -1);
  isNew = inserted;
  if (!inserted) {
    buffers[argument] = it->second;
    return it->second;
  }
  FailureOr<int> id = newBuffer(argument, function);
  if (succeeded(id))
    it->second = *id;
  return id;
}

LogicalResult ExecutableEmitter::emitArgument(BlockArgument argument,
                                              func::FuncOp function) {
  unsigned index = argument.getArgNumber();
  // Parameters, states and inputs are one buffer per name, whichever entry
  // points read them; `record` enters a new one in its table.
  auto emitShared = [&](llvm::StringLiteral attrName,
                        llvm::function_ref<void(StringRef name, int id)> record)
      -> std::optional<LogicalResult> {
    auto name = function.getArgAttrOfType<StringAttr>(index, attrName);
    if (!name)
      return std::nullopt;
    bool isNew = false;
    FailureOr<int> id = sharedBuffer(argument, function, name, isNew);
    if (failed(id))
      return failure();
    if (isNew) {
      record(name.getValue(), *id);
      if (auto global = function.getArgAttrOfType<TypeAttr>(
              index, mlir::twill::kGlobalAttrName))
        recordSplit(cast<RankedTensorType>(global.getValue()),
                    *executable.mutable_buffers(*id));
    }
    return success();
  };
  if (auto emitted =
          emitShared(mlir::twill::kParamAttrName, [&](StringRef name, int id) {
            ::twill::Parameter &parameter = *executable.add_parameters();
            parameter.set_name(name.str());
            parameter.set_buffer(id);
            parameter.set_trainable(
                function.getArgAttr(index, mlir::twill::kTrainableAttrName) !=
                nullptr);
          }))
    return *emitted;
  if (auto emitted =
          emitShared(mlir::twill::kStateAttrName, [&](StringRef name, int id) {
            ::twill::State &state = *executable.add_states();
            state.set_name(name.str());
            state.set_buffer(id);
          }))
    return *emitted;
  if (auto emitted =
          emitShared(mlir::twill::kInputAttrName, [&](StringRef name, int id) {
            ::twill::Input &input = *executable.add_inputs();
            input.set_name(name.str());
            input.set_buffer(id);
          }))
    return *emitted;
  return function.emitError("argument ")
         << index << " is neither a parameter (" << mlir::twill::kParamAttrName
         << "), a state (" << mlir::twill::kStateAttrName << ") nor an input ("
         << mlir::twill::kInputAttrName << ")";
}

LogicalResult
ExecutableEmitter::emitAttribute(Operation *op, NamedAttribute attribute,
                                 ::twill::Instruction &instruction) {
  ::twill::AttributeValue value;
  Attribute attr = attribute.getValue();
  if (auto boolean = dyn_cast<BoolAttr>(attr)) {
    value.set_bool_value(boolean.getValue());
  } else if (auto integer = dyn_cast<IntegerAttr>(attr)) {
    value.set_int_value(integer.getInt());
  } else if (auto real = dyn_cast<FloatAttr>(attr)) {
    value.set_float_value(real.getValueAsDouble());
  } else if (isa<UnitAttr>(attr)) {
    value.set_bool_value(true);
  } else if (auto text = dyn_cast<StringAttr>(attr)) {
    value.set_string_value(text.str());
  } else if (auto symbol = dyn_cast<FlatSymbolRefAttr>(attr)) {
    value.set_string_value(symbol.getValue().str());
  } else if (auto list = dyn_cast<DenseI64ArrayAttr>(attr)) {
    for (int64_t element : list.asArrayRef())
      value.mutable_int_list()->add_values(element);
  } else {
    return op->emitError("cannot emit attribute '")
           << attribute.getName() << "' (" << attr << ")";
  }
  (*instruction.mutable_attributes())[attribute.getName().str()] = value;
  return success();
}

LogicalResult ExecutableEmitter::emitFunction(func::FuncOp function) {
  if (!function.getBody().hasOneBlock())
    return function.emitError("entry points must have one block");
  Block &body = function.getBody().front();
  for (BlockArgument argument : body.getArguments())
    if (failed(emitArgument(argument, function)))
      return failure();

  ::twill::EntryPoint &entry = *executable.add_entry_points();
  entry.set_name(function.getSymName().str());
  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, output] : llvm::enumerate(ret.getOperands())) {
        entry.add_outputs(buffers.lookup(output));
        auto name = function.getResultAttrOfType<StringAttr>(
            index, mlir::twill::kOutputAttrName);
        entry.add_output_names(name ? name.str() : "");
      }
      continue;
    }
    if (op.getNumRegions() != 0)
      return op.emitError("cannot emit ops with regions");
    ::twill::Instruction &instruction = *entry.add_instructions();
    instruction.set_op(op.getName().getStringRef().str());
    for (Value operand : op.getOperands())
      instruction.add_operands(buffers.lookup(operand));
    auto globals =
        op.getAttrOfType<ArrayAttr>(mlir::twill::kGlobalResultsAttrName);
    for (auto [index, result] : llvm::enumerate(op.getResults())) {
      FailureOr<int> id = newBuffer(result, &op);
      if (failed(id))
        return failure();
      instruction.add_results(*id);
      if (globals && index < globals.size())
        recordSplit(cast<RankedTensorType>(
                        cast<TypeAttr>(globals[index]).getValue()),
                    *executable.mutable_buffers(*id));
    }
    // Attributes in the twill. namespace annotate the IR for the compiler;
    // the kernels read the op's own.
    for (NamedAttribute attribute : op.getAttrs())
      if (!attribute.getName().strref().starts_with("twill.") &&
          failed(emitAttribute(&op, attribute, instruction)))
        return failure();
  }
  return success();
}

FailureOr<Executable> mlir::twill::emitExecutable(ModuleOp module) {
  ExecutableEmitter emitter;
  for (auto mesh : module.getOps<mlir::twill::MeshOp>())
    emitter.emitMesh(mesh);
  for (auto function : module.getOps<func::FuncOp>())
    if (failed(emitter.emitFunction(function)))
      return failure();
  return emitter.take();
}

namespace {
struct EmitExecutablePass
    : public mlir::twill::impl::EmitExecutableBase<EmitExecutablePass> {
  using EmitExecutableBase::EmitExecutableBase;

  void runOnOperation() override {
    FailureOr<Executable> executable =
        mlir::twill::emitExecutable(getOperation());
    if (failed(executable))
      return signalPassFailure();
    std::string text;
    google::protobuf::TextFormat::PrintToString(*executable, &text);
    if (output == "-") {
      llvm::errs() << text;
      return;
    }
    std::string error;
    auto file = mlir::openOutputFile(output, &error);
    if (!file) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    file->os() << text;
    file->keep();
  }
};
} // namespace
