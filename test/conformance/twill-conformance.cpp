//===- twill-conformance.cpp - every instruction, backend against cpu -----===//
//
//   twill-conformance [--backend=cuda|cpu] [--filter=OP[,OP...]]
//                     [--first=N] [--case=N] [--perturb]
//
// Runs each case of ConformanceSuite (one instruction, random operands) on
// the cpu backend, the reference, and on the backend checked, and compares
// every result: one line per case ([its number], op, dtype, shapes, max
// error, tolerance, PASS or FAIL) and a total. Exits 0 when every case
// passes and every instruction kind has a case, 1 otherwise, and 77
// (skipped) where the cuda backend cannot run: no GPU, or a build without
// CUDA (a GPU that CUDA cannot use is an error, exit 1).
//
// A case that leaves the backend unable to run anything more (a GPU's
// fault ends its context) stops the run, which says so and names the
// case to go on from in a new process (--first); --case runs one case
// alone, to tell whether a failure is its own.
//
// --backend=cpu checks the harness itself (the cpu backend against itself
// must agree exactly), and --perturb checks its comparison: it shifts one
// element of every result of the backend checked past the tolerance, and
// passes only if every such case then fails.
//
//===----------------------------------------------------------------------===//

#include "test/conformance/ConformanceSuite.h"

#include "runtime/backend/Backend.h"
#include "runtime/executable/Opcodes.h"
#include "support/Fp8.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

namespace cl = llvm::cl;
using namespace twill;
using namespace twill::conformance;

static cl::OptionCategory options("twill-conformance options");
static cl::opt<std::string>
    backendName("backend",
                cl::desc("The backend checked against the cpu backend: cuda "
                         "(the default) or cpu (the harness checking itself)"),
                cl::value_desc("cuda|cpu"), cl::init("cuda"), cl::cat(options));
static cl::opt<std::string>
    filter("filter",
           cl::desc("Only the cases of ops whose name contains one of these "
                    "(comma-separated)"),
           cl::value_desc("op[,op...]"), cl::cat(options));
static cl::opt<int> first("first",
                          cl::desc("Start at case N (the numbers the report "
                                   "gives), skipping those before"),
                          cl::value_desc("N"), cl::init(0), cl::cat(options));
static cl::opt<int> only("case", cl::desc("Run case N alone"),
                         cl::value_desc("N"), cl::init(-1), cl::cat(options));
static cl::opt<bool> perturb(
    "perturb",
    cl::desc("Check the comparison: shift one element of each result of the "
             "backend checked past its tolerance; passes if every case fails"),
    cl::cat(options));

namespace {

constexpr int kSkipped = 77;

/// Whether --filter selects the op named `op`.
bool selected(llvm::StringRef op) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(filter).split(parts, ',');
  return llvm::any_of(parts, [&](llvm::StringRef part) {
    return op.contains(part.trim());
  });
}

bool isFloat(DType dtype) { return dtype == F32 || dtype == BF16; }

/// An operand's values, drawn from its fill with a generator seeded by the
/// buffer, so both backends (and every run) get the same ones.
std::vector<double> draw(const Fill &fill, int64_t count, int64_t rowLength,
                         int id) {
  std::mt19937_64 random(0x7417 + id);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> gaussian(0, fill.a);
  std::vector<double> values(count);
  // A document boundary at about one position in six.
  auto boundary = [&](int64_t i) {
    return i % rowLength && unit(random) < 1.0 / 6;
  };
  int64_t position = 0, document = 0;
  double scale = 1;
  for (int64_t i = 0; i < count; ++i) {
    double &v = values[i];
    switch (fill.kind) {
    case Fill::Normal:
      v = gaussian(random);
      break;
    case Fill::Uniform:
      v = fill.a + (fill.b - fill.a) * unit(random);
      break;
    case Fill::Integers:
      v = std::floor(fill.a + (fill.b - fill.a) * unit(random));
      break;
    case Fill::Labels:
      v = unit(random) < 0.2 ? fill.b : std::floor(fill.a * unit(random));
      break;
    case Fill::Positions:
      position = i % rowLength == 0 || boundary(i) ? 0 : position + 1;
      v = double(position);
      break;
    case Fill::Segments:
      document = i % rowLength == 0 ? 0 : document + boundary(i);
      v = double(document);
      break;
    case Fill::Value:
      v = fill.a;
      break;
    case Fill::Fp8Blocks: {
      int64_t place = i % rowLength % int64_t(fill.a);
      if (place == 0)
        scale = std::ldexp(1.0, -int(unit(random) * 12));
      double sign = unit(random) < 0.5 ? -1 : 1;
      // Bytes 0-126 are the finite non-negative values.
      v = sign * scale *
          (place == 0 ? fp8::kMax : fp8::toFloat(uint8_t(unit(random) * 127)));
      break;
    }
    }
  }
  return values;
}

/// Writes `values` into buffer `id`, as its dtype stores them.
llvm::Error store(BufferSet &buffers, int id, llvm::ArrayRef<double> values) {
  switch (buffers.info(id).dtype()) {
  case I32:
    for (auto [i, v] : llvm::enumerate(values))
      buffers.as<int32_t>(id)[i] = int32_t(v);
    return llvm::Error::success();
  case I64:
    for (auto [i, v] : llvm::enumerate(values))
      buffers.as<int64_t>(id)[i] = int64_t(v);
    return llvm::Error::success();
  case U8:
    for (auto [i, v] : llvm::enumerate(values))
      buffers.as<uint8_t>(id)[i] = uint8_t(int64_t(v)); // modulo 256
    return llvm::Error::success();
  default:
    return buffers.setFloats(id,
                             std::vector<float>(values.begin(), values.end()));
  }
}

/// A result's values as doubles: floats widened, integers converted.
llvm::Expected<std::vector<double>> load(BufferSet &buffers, int id) {
  int64_t count = numElements(buffers.info(id));
  switch (buffers.info(id).dtype()) {
  case I32:
    return std::vector<double>(buffers.as<int32_t>(id),
                               buffers.as<int32_t>(id) + count);
  case I64:
    return std::vector<double>(buffers.as<int64_t>(id),
                               buffers.as<int64_t>(id) + count);
  default: {
    llvm::Expected<std::vector<float>> values = buffers.floats(id);
    if (!values)
      return values.takeError();
    return std::vector<double>(values->begin(), values->end());
  }
  }
}

/// A backend with its own copy of every buffer.
struct Side {
  std::unique_ptr<BufferSet> buffers;
  std::unique_ptr<Backend> backend;

  /// Fills the case's operands, poisons its results (NaN, or an unlikely
  /// integer) so that an element no kernel writes shows, runs it, and
  /// brings the results back.
  llvm::Error run(const Executable &executable, const Case &c) {
    std::vector<int> ids;
    for (const auto &[id, fill] : c.operands) {
      const Buffer &info = buffers->info(id);
      int64_t rowLength =
          info.shape_size() ? info.shape(info.shape_size() - 1) : 1;
      if (auto error =
              store(*buffers, id, draw(fill, numElements(info), rowLength, id)))
        return error;
      ids.push_back(id);
    }
    for (int id : c.results) {
      std::vector<double> poison(numElements(buffers->info(id)),
                                 isFloat(buffers->info(id).dtype())
                                     ? std::numeric_limits<double>::quiet_NaN()
                                     : -123456789.0);
      if (auto error = store(*buffers, id, poison))
        return error;
      ids.push_back(id);
    }
    if (auto error = backend->upload(ids))
      return error;
    if (auto error = backend->run(executable.entry_points(c.entry), {}))
      return error;
    return backend->download(c.results);
  }
};

/// How far the checked results are from the reference's: the largest
/// |test - reference| over the largest |reference| (for an all-zero
/// reference, the largest |test|).
struct Comparison {
  double error = 0;
  std::string problem; // what makes it fail regardless of the error
};

llvm::Expected<Comparison> compare(Side &reference, Side &checked,
                                   const Case &c) {
  Comparison result;
  for (int id : c.results) {
    llvm::Expected<std::vector<double>> expected = load(*reference.buffers, id);
    if (!expected)
      return expected.takeError();
    llvm::Expected<std::vector<double>> actual = load(*checked.buffers, id);
    if (!actual)
      return actual.takeError();
    double scale = 0;
    for (double v : *expected) {
      if (std::isnan(v))
        result.problem = "the reference left an element unwritten (NaN)";
      scale = std::max(scale, std::abs(v));
    }
    if (perturb && !actual->empty()) {
      double shift = 4 * std::max(c.tolerance, 1e-6) * (scale > 0 ? scale : 1);
      (*actual)[actual->size() / 2] +=
          isFloat(checked.buffers->info(id).dtype()) ? shift : 1;
    }
    for (auto [want, got] : llvm::zip_equal(*expected, *actual)) {
      double difference = std::abs(got - want);
      if (std::isnan(got) && !std::isnan(want))
        difference = std::numeric_limits<double>::infinity();
      result.error =
          std::max(result.error, difference / (scale > 0 ? scale : 1));
    }
  }
  return result;
}

/// One case on both sides: its line of the report; true if it passed.
bool check(const Executable &executable, int number, const Case &c,
           Side &reference, Side &checked) {
  llvm::Error referenceError = reference.run(executable, c);
  llvm::Error checkedError = checked.run(executable, c);
  std::string verdict;
  bool passed = false;
  if (c.refused) {
    passed = referenceError && checkedError;
    verdict = llvm::formatv(
                  "cpu {0}, {1} {2}", referenceError ? "refuses" : "runs it",
                  backendName.getValue(), checkedError ? "refuses" : "runs it")
                  .str();
    if (checkedError)
      verdict += " (" + llvm::toString(std::move(checkedError)) + ")";
    llvm::consumeError(std::move(referenceError));
  } else if (referenceError || checkedError) {
    verdict =
        "error: " + (referenceError
                         ? "cpu: " + llvm::toString(std::move(referenceError))
                         : llvm::toString(std::move(checkedError)));
    llvm::consumeError(std::move(checkedError));
  } else if (llvm::Expected<Comparison> comparison =
                 compare(reference, checked, c)) {
    // The cpu backend's kernels are deterministic: against itself, exact.
    double tolerance = backendName == "cpu" ? 0 : c.tolerance;
    passed = comparison->problem.empty() && comparison->error <= tolerance;
    verdict = llvm::formatv("max error {0:e1}, tolerance {1:e1}",
                            comparison->error, tolerance)
                  .str();
    if (!comparison->problem.empty())
      verdict += ": " + comparison->problem;
  } else {
    verdict = "error: " + llvm::toString(comparison.takeError());
  }
  // Under --perturb a case passes when its comparison catches the shift.
  bool counted = perturb ? !passed : passed;
  llvm::outs() << llvm::formatv("[{0}] {1,-26} {2,-4} {3}{4}: {5} {6}\n",
                                number, opcodeName(c.opcode), c.dtype,
                                c.shapes,
                                c.note.empty() ? "" : " (" + c.note + ")",
                                verdict, counted ? "PASS" : "FAIL");
  llvm::outs().flush(); // every line out before a crash could lose it
  return counted;
}

llvm::Expected<Side> makeSide(const Executable &executable, Communicator &comm,
                              llvm::StringRef name) {
  Side side;
  side.buffers = std::make_unique<BufferSet>(executable);
  if (name == "cpu") {
    side.backend = createCpuBackend(*side.buffers, &comm);
    return std::move(side);
  }
  if (name != "cuda")
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--backend is cpu or cuda, not " + name);
  llvm::Expected<std::unique_ptr<Backend>> backend =
      createCudaBackend(*side.buffers, &comm);
  if (!backend)
    return backend.takeError();
  side.backend = std::move(*backend);
  return std::move(side);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(options);
  cl::ParseCommandLineOptions(argc, argv,
                              "Every instruction on a backend against the cpu "
                              "backend\n");
  Suite suite = conformanceSuite();
  if (llvm::Error error = verifyExecutable(suite.executable)) {
    llvm::errs() << "twill-conformance: " << llvm::toString(std::move(error))
                 << "\n";
    return 1;
  }
  std::unique_ptr<Communicator> comm =
      Communicator::standIn(kMeshAxes, kMeshShape, kMeshCoordinates);
  llvm::Expected<Side> reference = makeSide(suite.executable, *comm, "cpu");
  llvm::Expected<Side> checked =
      reference ? makeSide(suite.executable, *comm, backendName)
                : reference.takeError();
  if (!checked) {
    bool noGpu = checked.errorIsA<NoGpuError>();
    llvm::errs() << "twill-conformance: "
                 << llvm::toString(checked.takeError()) << "\n";
    if (noGpu)
      llvm::errs() << "SKIPPED: the cuda backend cannot run here\n";
    return noGpu ? kSkipped : 1;
  }

  auto began = std::chrono::steady_clock::now();
  int passed = 0, run = 0, stoppedAt = -1;
  for (auto [number, c] : llvm::enumerate(suite.cases)) {
    if (!selected(opcodeName(c.opcode)) || int(number) < first ||
        (only >= 0 && int(number) != only))
      continue;
    // A perturbation needs a result with elements to shift.
    if (perturb && (c.refused || llvm::all_of(c.results, [&](int id) {
                      return numElements(suite.executable.buffers(id)) == 0;
                    })))
      continue;
    ++run;
    passed += check(suite.executable, number, c, *reference, *checked);
    if (llvm::Error lost = checked->backend->usable()) {
      llvm::outs() << llvm::formatv(
          "conformance: the {0} backend can run nothing more after case "
          "{1} ({2}); the cases after it need a new process: --first={3}\n",
          backendName, number, llvm::toString(std::move(lost)), number + 1);
      stoppedAt = int(number);
      break;
    }
  }
  // Every kind must have a case the checked backend ran and compared (a
  // start's case runs its wait too).
  int missing = 0;
  bool whole = filter.empty() && first == 0 && only < 0 && stoppedAt < 0;
  for (Opcode kind : allOpcodes())
    if (whole && llvm::none_of(suite.cases, [&](const Case &c) {
          return !c.refused &&
                 (c.opcode == kind || (kind == WAIT && isStart(c.opcode)));
        })) {
      llvm::outs() << llvm::formatv("{0,-26} has no conformance case FAIL\n",
                                    opcodeName(kind));
      ++missing;
    }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  llvm::outs() << llvm::formatv(
      "conformance{0}: {1} of {2} cases passed, {3} failed, {4} instruction "
      "kinds without a case; {5} against cpu in {6:f1} s{7}\n",
      perturb ? " (perturbed: a pass is a caught shift)" : "", passed, run,
      run - passed, missing, backendName, seconds,
      stoppedAt >= 0 ? llvm::formatv(" (stopped after case {0})", stoppedAt)
                           .str()
                     : "");
  return passed == run && missing == 0 ? 0 : 1;
}
