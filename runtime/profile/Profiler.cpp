//===- Profiler.cpp - traces and summaries of recorded spans --------------===//

#include "runtime/profile/Profiler.h"

#include "opmodel/Flops.h"
#include "runtime/executable/Opcodes.h"
#include "support/AtomicFile.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace twill;

std::string twill::layerOf(const Instruction &instruction) {
  return instruction.has_layer()
             ? "layer " + std::to_string(instruction.layer())
             : "outside the layers";
}

double twill::bytesOf(const Executable &executable,
                      const Instruction &instruction) {
  double bytes = 0;
  for (int id : instruction.operands())
    bytes += executable.buffers(id).size_bytes();
  for (int id : instruction.results())
    bytes += executable.buffers(id).size_bytes();
  return bytes;
}

double twill::flopsOf(const Executable &executable,
                      const Instruction &instruction) {
  auto shapeOf = [&](int id) {
    return llvm::ArrayRef<int64_t>(executable.buffers(id).shape().data(),
                                   executable.buffers(id).shape_size());
  };
  llvm::SmallVector<llvm::ArrayRef<int64_t>> operands =
      llvm::map_to_vector(instruction.operands(), shapeOf);
  if (instruction.results_size() == 0)
    return 0;
  return flopsOf(instruction, operands, shapeOf(instruction.results(0)));
}

/// "[2,17,6,12] [2,17,2,12] -> [2,17,6,12]".
static std::string shapesOf(const Executable &executable,
                            const Instruction &instruction) {
  auto shape = [&](int id) {
    const Buffer &buffer = executable.buffers(id);
    std::string text = "[";
    for (int d = 0; d < buffer.shape_size(); ++d)
      text += (d ? "," : "") + std::to_string(buffer.shape(d));
    return text + "]" + (buffer.dtype() == BF16 ? "bf16" : "");
  };
  std::string text;
  for (int id : instruction.operands())
    text += shape(id) + " ";
  text += "->";
  for (int id : instruction.results())
    text += " " + shape(id);
  return text;
}

/// The value an instruction is named after: its first result, or for one
/// without results its first operand.
static llvm::StringRef valueName(const Executable &executable,
                                 const Instruction &instruction) {
  int id = instruction.results_size()    ? instruction.results(0)
           : instruction.operands_size() ? instruction.operands(0)
                                         : -1;
  return id < 0 ? llvm::StringRef() : executable.buffers(id).name();
}

llvm::Error Profiler::writeTrace(llvm::StringRef path, int rank) const {
  // Whole or not at all, and a full disk an error naming the file.
  return writeFileAtomically(path, [&](llvm::raw_ostream &file) {
    llvm::json::OStream json(file);
    json.object([&] {
      json.attribute("displayTimeUnit", "ms");
      json.attributeArray("traceEvents", [&] {
        const char *tracks[] = {"compute", "communication", "entry points"};
        for (int track = 0; track < 3; ++track)
          json.object([&] {
            json.attribute("ph", "M");
            json.attribute("name", "thread_name");
            json.attribute("pid", rank);
            json.attribute("tid", track);
            json.attributeObject(
                "args", [&] { json.attribute("name", tracks[track]); });
          });
        for (const Span &span : spans)
          json.object([&] {
            json.attribute("ph", "X");
            json.attribute("pid", rank);
            json.attribute("tid", int(span.track));
            json.attribute("ts", span.start * 1e6);
            json.attribute("dur", (span.end - span.start) * 1e6);
            if (span.instruction < 0) {
              json.attribute("name", span.entry->name());
              return;
            }
            const Instruction &instruction =
                span.entry->instructions(span.instruction);
            // A transfer is named by its collective, whether it was started
            // and waited apart or at once.
            json.attribute("name",
                           opcodeName(span.track == Communication
                                          ? blockingOf(instruction.opcode())
                                          : instruction.opcode()));
            json.attributeObject("args", [&] {
              json.attribute("shapes", shapesOf(executable, instruction));
              json.attribute("layer", layerOf(instruction));
              json.attribute("value", valueName(executable, instruction));
              json.attribute("entry", span.entry->name());
              json.attribute("index", span.instruction);
            });
          });
      });
    });
    file << "\n";
  });
}

/// "512.3 TFLOP/s", "1.21 TB/s": a rate in its unit.
static std::string rate(double perSecond, llvm::StringRef unit) {
  const char *prefixes[] = {"", "K", "M", "G", "T", "P"};
  int prefix = 0;
  while (perSecond >= 1000 && prefix < 5) {
    perSecond /= 1000;
    ++prefix;
  }
  return llvm::formatv("{0:f1} {1}{2}/s", perSecond, prefixes[prefix], unit);
}

void Profiler::printSummary(llvm::raw_ostream &os) const {
  // Leave out the runs up to the first optimizer step when others follow.
  double from = 0;
  for (const Span &span : spans)
    if (span.track == EntryPoints && span.entry->role() == OPTIMIZER_STEP) {
      from = span.end;
      break;
    }
  bool laterRuns = llvm::any_of(spans, [&](const Span &span) {
    return span.track == EntryPoints && span.start >= from;
  });
  if (!laterRuns)
    from = 0;

  struct Totals {
    int64_t calls = 0;
    double seconds = 0, flops = 0, bytes = 0;
  };
  llvm::MapVector<llvm::StringRef, int64_t> runs;
  llvm::MapVector<Opcode, Totals> kinds;
  // In order of first appearance.
  llvm::MapVector<std::string, double, std::map<std::string, unsigned>> layers;
  double runSeconds = 0, computeSeconds = 0, communicationSeconds = 0;
  for (const Span &span : spans) {
    if (span.start < from)
      continue;
    double seconds = span.end - span.start;
    if (span.track == EntryPoints) {
      ++runs[span.entry->name()];
      runSeconds += seconds;
      continue;
    }
    if (span.track == Communication) {
      communicationSeconds += seconds;
      continue;
    }
    const Instruction &instruction = span.entry->instructions(span.instruction);
    Totals &kind = kinds[instruction.opcode()];
    ++kind.calls;
    kind.seconds += seconds;
    kind.flops += flopsOf(executable, instruction);
    kind.bytes += bytesOf(executable, instruction);
    layers[layerOf(instruction)] += seconds;
    computeSeconds += seconds;
  }
  if (runSeconds <= 0) {
    os << "profile: no runs recorded\n";
    return;
  }
  std::string counted;
  for (auto [name, count] : runs)
    counted +=
        llvm::formatv("{0}{1} {2}", counted.empty() ? "" : ", ", count, name);
  os << llvm::formatv("profile: {0} run(s){1}: {2:f3} ms\n", counted,
                      from > 0 ? ", after the first step" : "",
                      1e3 * runSeconds);
  auto share = [&](double seconds) { return 100 * seconds / runSeconds; };
  llvm::SmallVector<std::pair<Opcode, Totals>> sorted(kinds.begin(),
                                                      kinds.end());
  llvm::stable_sort(sorted, [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  os << llvm::formatv("  {0,-26} {1,8} {2,12} {3,7}  {4}\n", "op kind", "calls",
                      "ms", "share", "rate");
  for (const auto &[opcode, kind] : sorted)
    os << llvm::formatv(
        "  {0,-26} {1,8} {2,12:f3} {3,6:f1}%  {4}\n", opcodeName(opcode),
        kind.calls, 1e3 * kind.seconds, share(kind.seconds),
        kind.seconds <= 0 ? std::string("-")
        : kind.flops > 0  ? rate(kind.flops / kind.seconds, "FLOP")
                          : rate(kind.bytes / kind.seconds, "B"));
  auto line = [&](llvm::StringRef what, double seconds) {
    os << llvm::formatv("  {0,-35} {1,12:f3} {2,6:f1}%\n", what, 1e3 * seconds,
                        share(seconds));
  };
  line("all instructions", computeSeconds);
  line("outside instructions", runSeconds - computeSeconds);
  if (communicationSeconds > 0)
    line("collectives in flight (summed)", communicationSeconds);
  os << llvm::formatv("  {0,-35} {1,12} {2,7}\n", "layer", "ms", "share");
  for (const auto &[name, seconds] : layers)
    line(name, seconds);
}
