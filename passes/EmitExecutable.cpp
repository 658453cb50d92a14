//===- EmitExecutable.cpp - the twill-emit-executable pass ----------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "google/protobuf/text_format.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/FileUtilities.h"
#include "proto/OpcodeAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
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
  void setFormatVersion(int version) {
    executable.set_format_version(version);
  }
  void setArenaBytes(int64_t bytes) { executable.set_arena_bytes(bytes); }
  void setHostArenaBytes(int64_t bytes) {
    executable.set_host_arena_bytes(bytes);
  }
  Executable take() { return std::move(executable); }

private:
  FailureOr<int> newBuffer(Value value, Operation *where);
  FailureOr<int> sharedBuffer(BlockArgument argument, func::FuncOp function,
                              StringRef name, bool &isNew);
  LogicalResult emitArgument(BlockArgument argument, func::FuncOp function);

  Executable executable;
  llvm::DenseMap<Value, int> buffers;
  llvm::StringMap<int> sharedBuffers; // parameters, states and inputs
  llvm::StringMap<int> updatable;     // parameters and states
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
  if (type.isSignlessInteger(8)) // bytes: a quantized weight's
    return ::twill::U8;
  return std::nullopt;
}

FailureOr<int> ExecutableEmitter::newBuffer(Value value, Operation *where) {
  // A collective's handle is the buffer its result is written into.
  Type valueType = value.getType();
  if (auto pending = dyn_cast<mlir::twill::PendingType>(valueType))
    valueType = pending.getValue();
  auto type = dyn_cast<RankedTensorType>(valueType);
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

/// The Executable's ValueRole of the compiler's #twill.role.
static ::twill::ValueRole valueRoleOf(mlir::twill::ValueRole role) {
  using mlir::twill::ValueRole;
  switch (role) {
  case ValueRole::Tokens:
    return ::twill::TOKENS;
  case ValueRole::Labels:
    return ::twill::LABELS;
  case ValueRole::Positions:
    return ::twill::POSITIONS;
  case ValueRole::Segments:
    return ::twill::SEGMENTS;
  case ValueRole::TokenIndex:
    return ::twill::TOKEN_INDEX;
  case ValueRole::MicroBatch:
    return ::twill::MICRO_BATCH;
  case ValueRole::TotalSteps:
    return ::twill::TOTAL_STEPS;
  case ValueRole::ScheduleStep:
    return ::twill::SCHEDULE_STEP;
  case ValueRole::LossSum:
    return ::twill::LOSS_SUM;
  case ValueRole::TokenCount:
    return ::twill::TOKEN_COUNT;
  case ValueRole::GradNorm:
    return ::twill::GRAD_NORM;
  case ValueRole::Lr:
    return ::twill::LR;
  case ValueRole::DpoMetrics:
    return ::twill::DPO_METRICS;
  case ValueRole::ReferenceLogps:
    return ::twill::REFERENCE_LOGPS;
  case ValueRole::LossWeight:
    return ::twill::LOSS_WEIGHT;
  case ValueRole::GradientDivisor:
    return ::twill::GRADIENT_DIVISOR;
  case ValueRole::AttentionMask:
    return ::twill::ATTENTION_MASK;
  case ValueRole::StepTokens:
    return ::twill::STEP_TOKENS;
  case ValueRole::RouterAuxLoss:
    return ::twill::ROUTER_AUX_LOSS;
  }
  return ::twill::VALUE_UNSPECIFIED;
}

/// The role the attributes `attrs` (an argument's or a result's) state.
static ::twill::ValueRole valueRoleIn(DictionaryAttr attrs) {
  auto role = attrs ? attrs.getAs<mlir::twill::ValueRoleAttr>(
                          mlir::twill::kRoleAttrName)
                    : nullptr;
  return role ? valueRoleOf(role.getValue()) : ::twill::VALUE_UNSPECIFIED;
}

/// The parameter's roles, as the frontend stated them (twill.init,
/// twill.adapter, twill.stored, twill.quantized): what the runtime knows it
/// by.
static void describeRoles(func::FuncOp function, unsigned index,
                          ::twill::Parameter &parameter) {
  namespace tw = mlir::twill;
  if (auto init =
          function.getArgAttrOfType<tw::InitAttr>(index, tw::kInitAttrName)) {
    ::twill::Initializer &out = *parameter.mutable_init();
    switch (init.getKind()) {
    case tw::InitKind::Zeros:
      out.set_kind(::twill::Initializer::ZEROS);
      break;
    case tw::InitKind::Ones:
      out.set_kind(::twill::Initializer::ONES);
      break;
    case tw::InitKind::Normal:
      out.set_kind(::twill::Initializer::NORMAL);
      break;
    case tw::InitKind::KaimingUniform:
      out.set_kind(::twill::Initializer::KAIMING_UNIFORM);
      break;
    case tw::InitKind::RowNorms:
      out.set_kind(::twill::Initializer::ROW_NORMS);
      break;
    }
    out.set_std(init.getStd().convertToDouble());
    out.set_stream(init.getStream());
  }
  if (auto adapter = function.getArgAttrOfType<tw::AdapterAttr>(
          index, tw::kAdapterAttrName)) {
    ::twill::AdapterRole &out = *parameter.mutable_adapter();
    switch (adapter.getPart()) {
    case tw::AdapterPart::A:
      out.set_part(::twill::AdapterRole::LORA_A);
      break;
    case tw::AdapterPart::B:
      out.set_part(::twill::AdapterRole::LORA_B);
      break;
    case tw::AdapterPart::Magnitude:
      out.set_part(::twill::AdapterRole::MAGNITUDE);
      break;
    }
    out.set_of(adapter.getOf().str());
    if (!adapter.getTied().empty())
      out.set_tied(adapter.getTied().str());
  }
  if (auto stored = function.getArgAttrOfType<tw::StoredRowsAttr>(
          index, tw::kStoredAttrName)) {
    ::twill::StoredRows &out = *parameter.mutable_stored();
    out.set_tensor(stored.getTensor().str());
    out.set_first_row(stored.getFirstRow());
    out.set_tensor_rows(stored.getTensorRows());
  }
  if (auto stacked =
          function.getArgAttrOfType<ArrayAttr>(index, tw::kStackedAttrName))
    for (auto tensor : stacked.getAsValueRange<StringAttr>())
      parameter.add_stacked(tensor.str());
  if (auto quantized = function.getArgAttrOfType<tw::QuantizedAttr>(
          index, tw::kQuantizedAttrName)) {
    ::twill::QuantizedRole &out = *parameter.mutable_quantized();
    switch (quantized.getPart()) {
    case tw::QuantizedPart::Codes:
      out.set_part(::twill::QuantizedRole::CODES);
      break;
    case tw::QuantizedPart::Absmax:
      out.set_part(::twill::QuantizedRole::ABSMAX);
      break;
    case tw::QuantizedPart::NestedAbsmax:
      out.set_part(::twill::QuantizedRole::NESTED_ABSMAX);
      break;
    case tw::QuantizedPart::NestedOffset:
      out.set_part(::twill::QuantizedRole::NESTED_OFFSET);
      break;
    case tw::QuantizedPart::Fp8Values:
      out.set_part(::twill::QuantizedRole::FP8_VALUES);
      break;
    case tw::QuantizedPart::Fp8RowScales:
      out.set_part(::twill::QuantizedRole::FP8_ROW_SCALES);
      break;
    }
    out.set_of(quantized.getOf().str());
    out.set_block_size(quantized.getBlockSize());
    out.set_nested_block_size(quantized.getNestedBlockSize());
    if (quantized.getExperts())
      out.set_experts(quantized.getExperts());
  }
}

/// What the state is, as twill-optimizer stated it (twill.state_role).
static void describeState(func::FuncOp function, unsigned index,
                          ::twill::State &state) {
  namespace tw = mlir::twill;
  auto role = function.getArgAttrOfType<tw::StateRoleAttr>(
      index, tw::kStateRoleAttrName);
  if (!role)
    return;
  switch (role.getKind()) {
  case tw::StateKind::GradSum:
    state.set_kind(::twill::State::GRAD_SUM);
    break;
  case tw::StateKind::ExpAvg:
    state.set_kind(::twill::State::EXP_AVG);
    break;
  case tw::StateKind::ExpAvgSq:
    state.set_kind(::twill::State::EXP_AVG_SQ);
    break;
  case tw::StateKind::Step:
    state.set_kind(::twill::State::STEP);
    break;
  }
  if (!role.getOf().empty())
    state.set_of(role.getOf().str());
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
            describeRoles(function, index, parameter);
            updatable[name] = id;
          }))
    return *emitted;
  if (auto emitted =
          emitShared(mlir::twill::kStateAttrName, [&](StringRef name, int id) {
            ::twill::State &state = *executable.add_states();
            state.set_name(name.str());
            state.set_buffer(id);
            describeState(function, index, state);
            updatable[name] = id;
          }))
    return *emitted;
  if (auto emitted =
          emitShared(mlir::twill::kInputAttrName, [&](StringRef name, int id) {
            ::twill::Input &input = *executable.add_inputs();
            input.set_name(name.str());
            input.set_buffer(id);
            input.set_role(valueRoleIn(function.getArgAttrDict(index)));
          }))
    return *emitted;
  return function.emitError("argument ")
         << index << " is neither a parameter (" << mlir::twill::kParamAttrName
         << "), a state (" << mlir::twill::kStateAttrName << ") nor an input ("
         << mlir::twill::kInputAttrName << ")";
}

/// The opcode of a twill op: the Opcode named as the op is
/// ("twill.rms_norm_grad": RMS_NORM_GRAD), which is how the runtime names
/// it back (opcodeName); the enum is generated from the ops' ODS, so every
/// op with an `opcode` has its value.
std::optional<::twill::Opcode> mlir::twill::opcodeOf(OperationName name) {
  ::twill::Opcode code;
  if (name.getDialectNamespace() != TwillDialect::getDialectNamespace() ||
      !::twill::Opcode_Parse(name.stripDialect().upper(), &code) ||
      code == ::twill::OPCODE_UNSPECIFIED)
    return std::nullopt;
  return code;
}

// An attribute's value as its field holds it: an absent OptionalAttr is 0,
// false or "".
static double toProto(const llvm::APFloat &value) {
  return value.convertToDouble();
}
static int64_t toProto(uint64_t value) { return int64_t(value); }
static bool toProto(bool value) { return value; }
static std::string toProto(StringRef value) { return value.str(); }
template <typename T>
static auto toProto(const std::optional<T> &value)
    -> decltype(toProto(*value)) {
  return value ? toProto(*value) : decltype(toProto(*value))();
}

// describeAttributes, generated from each op's ODS and the messages of
// dialects/twill/TwillExecutable.td: renaming an ODS attribute breaks the
// build instead of silently changing what the runtime reads.
#include "passes/ExecutableAttributes.inc"

LogicalResult mlir::twill::describeOp(Operation *op,
                                      ::twill::Instruction &out) {
  std::optional<::twill::Opcode> code = opcodeOf(op->getName());
  if (!code)
    return failure();
  out.set_opcode(*code);
  describeAttributes(op, out);
  ::twill::Instruction::AttributesCase declared = ::twill::attributesOf(*code);
  if (out.attributes_case() == declared)
    return success();
  // executable.proto says which attributes the opcode carries.
  const google::protobuf::FieldDescriptor *field =
      ::twill::Instruction::descriptor()->FindFieldByNumber(declared);
  return op->emitError("the emitter writes ")
         << (field ? "no " + field->name() : std::string("attributes"))
         << " attributes for it, which its opcode "
         << ::twill::Opcode_Name(*code)
         << (field ? " carries" : " has none of");
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
  entry.set_role(::twill::ROLE_UNSPECIFIED);
  if (std::optional<mlir::twill::EntryRole> role =
          mlir::twill::entryRoleOf(function))
    switch (*role) {
    case mlir::twill::EntryRole::Forward:
      entry.set_role(::twill::FORWARD);
      break;
    case mlir::twill::EntryRole::TrainStep:
      entry.set_role(::twill::TRAIN_STEP);
      break;
    case mlir::twill::EntryRole::OptimizerStep:
      entry.set_role(::twill::OPTIMIZER_STEP);
      break;
    case mlir::twill::EntryRole::Reference:
      entry.set_role(::twill::REFERENCE);
      break;
    }
  // The arguments whose new values the entry returns: an op that writes
  // one in place (twill-plan-memory's kInPlaceOffset) writes their buffer.
  llvm::DenseMap<Value, BlockArgument> updates;
  for (auto [value, state] :
       llvm::zip_equal(body.getTerminator()->getOperands(),
                       mlir::twill::updatedArguments(function)))
    if (state)
      updates[value] = state;
  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, output] : llvm::enumerate(ret.getOperands())) {
        int id = buffers.lookup(output);
        entry.add_outputs(id);
        auto name = function.getResultAttrOfType<StringAttr>(
            index, mlir::twill::kOutputAttrName);
        entry.add_output_names(name ? name.str() : "");
        entry.add_output_roles(valueRoleIn(function.getResultAttrDict(index)));
        // A result named after a parameter or a state is its new value
        // (its very buffer where an op wrote it in place).
        auto updated = name ? updatable.find(name.getValue()) : updatable.end();
        entry.add_output_updates(updated != updatable.end() ? updated->second
                                                            : -1);
      }
      continue;
    }
    if (op.getNumRegions() != 0)
      return op.emitError("cannot emit ops with regions");
    ::twill::Instruction &instruction = *entry.add_instructions();
    if (failed(mlir::twill::describeOp(&op, instruction)))
      return instruction.has_opcode() // the error is said
                 ? failure()
                 : op.emitError("cannot emit ")
                       << op.getName() << ": the Executable has no opcode for it";
    if (std::optional<int64_t> layer =
            mlir::twill::forwardOrBackwardLayerOf(&op))
      instruction.set_layer(*layer);
    for (Value operand : op.getOperands())
      instruction.add_operands(buffers.lookup(operand));
    // A wait writes nothing: its result is the buffer its start fills.
    if (auto wait = dyn_cast<mlir::twill::WaitOp>(op)) {
      buffers[wait.getResult()] = buffers.lookup(wait.getHandle());
      continue;
    }
    auto globals =
        op.getAttrOfType<ArrayAttr>(mlir::twill::kGlobalResultsAttrName);
    auto offsets =
        op.getAttrOfType<DenseI64ArrayAttr>(mlir::twill::kArenaOffsetsAttrName);
    for (auto [index, result] : llvm::enumerate(op.getResults())) {
      if (offsets && offsets[index] == mlir::twill::kInPlaceOffset) {
        BlockArgument state = updates.lookup(result);
        if (!state)
          return op.emitError("result ")
                 << index << " is planned in place, and updates nothing";
        buffers[result] = buffers.lookup(state);
        instruction.add_results(buffers.lookup(state));
        continue;
      }
      FailureOr<int> id = newBuffer(result, &op);
      if (failed(id))
        return failure();
      instruction.add_results(*id);
      if (op.hasAttr(mlir::twill::kHostReadAttrName))
        executable.mutable_buffers(*id)->set_host_read(true);
      if (offsets && offsets[index] >= 0) {
        executable.mutable_buffers(*id)->set_arena_offset(offsets[index]);
        if (mlir::twill::inHostMemory(result))
          executable.mutable_buffers(*id)->set_in_host_arena(true);
      }
      if (globals && index < globals.size())
        recordSplit(
            cast<RankedTensorType>(cast<TypeAttr>(globals[index]).getValue()),
            *executable.mutable_buffers(*id));
    }
  }
  return success();
}

FailureOr<Executable> mlir::twill::emitExecutable(ModuleOp module) {
  ExecutableEmitter emitter;
  emitter.setFormatVersion(::twill::EXECUTABLE_FORMAT);
  if (auto arena =
          module->getAttrOfType<IntegerAttr>(mlir::twill::kArenaBytesAttrName))
    emitter.setArenaBytes(arena.getInt());
  if (auto arena = module->getAttrOfType<IntegerAttr>(
          mlir::twill::kHostArenaBytesAttrName))
    emitter.setHostArenaBytes(arena.getInt());
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
