//===- FusedAttention.cpp - attention as cuDNN's fused SDPA ---------------===//

#include "runtime/backend/cuda/FusedAttention.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cudnn_frontend.h>

#include <chrono>
#include <map>

using namespace twill;
namespace fe = cudnn_frontend;

namespace {

llvm::Error problem(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// A frontend call's error, naming the graph and the step.
llvm::Error check(fe::error_t status, llvm::StringRef step) {
  if (status.is_good())
    return llvm::Error::success();
  return problem("cuDNN's fused attention: " + step + ": " +
                 status.get_message());
}

/// The graphs' tensors, as the variant pack names them.
enum Uid : int64_t {
  kQuery = 1,
  kKey,
  kValue,
  kOutput,
  kStatistics,
  kOutputGrad,
  kQueryGrad,
  kKeyGrad,
  kValueGrad,
  kRowSegments,    // the segments as [batch, 1, seq, 1]: each query's
  kColumnSegments, // and as [batch, 1, 1, seq]: each key's
};

/// Dimensions [batch, heads, seq, headDim] and strides of one operand, over
/// Twill's [batch, seq, heads, headDim] values, and its element's bytes.
struct Layout {
  std::vector<int64_t> dims, strides;
  int64_t elementBytes;
};

Layout queryLayout(const SdpaProblem &p) {
  return {{p.batch, p.queryHeads, p.seq, p.headDim},
          {p.seq * p.queryRowElements, p.headDim, p.queryRowElements, 1},
          2};
}
Layout kvLayout(const SdpaProblem &p) {
  return {{p.batch, p.kvHeads, p.seq, p.headDim},
          {p.seq * p.kvRowElements, p.headDim, p.kvRowElements, 1},
          2};
}
/// The softmax statistics (each row's log-sum-exp): the op's fp32 result
/// [batch, heads, seq].
Layout statisticsLayout(const SdpaProblem &p) {
  return {{p.batch, p.queryHeads, p.seq, 1},
          {p.queryHeads * p.seq, p.seq, 1, 1},
          4};
}

int64_t alignmentOf(const Layout &layout) {
  return tensorAlignment(layout.dims, layout.strides, layout.elementBytes);
}

using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;
using Graph = std::shared_ptr<fe::graph::Graph>;

Tensor operand(fe::graph::Graph &graph, Uid uid, const char *name,
               const Layout &layout) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(layout.dims)
                          .set_stride(layout.strides)
                          .set_alignment(alignmentOf(layout)));
}

void setOutput(const Tensor &tensor, Uid uid, const Layout &layout) {
  tensor->set_output(true)
      .set_uid(uid)
      .set_dim(layout.dims)
      .set_stride(layout.strides)
      .set_alignment(alignmentOf(layout));
}

/// A graph for compute capability `smVersion`, or (0) the device's. Set
/// before any node is added: each node keeps a copy of the graph's context.
Graph newGraph(const char *name, int smVersion) {
  auto graph = std::make_shared<fe::graph::Graph>();
  if (smVersion > 0)
    graph->set_sm_version(smVersion);
  graph->set_name(name)
      .set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

namespace modifiers = fe::graph::attn::score_modifiers;

/// `score` where the query's and the key's documents are one, else -inf.
Tensor sameDocument(const Graph &graph, const Tensor &score,
                    const Tensor &rowSegments, const Tensor &columnSegments) {
  Tensor same =
      graph->pointwise(rowSegments, columnSegments,
                       fe::graph::Pointwise_attributes()
                           .set_name("same_document")
                           .set_mode(fe::PointwiseMode_t::CMP_EQ)
                           .set_compute_data_type(fe::DataType_t::BOOLEAN));
  same->set_data_type(fe::DataType_t::BOOLEAN);
  auto hidden = std::make_shared<fe::graph::Tensor_attributes>(
      modifiers::get_negative_inf_value());
  return graph->pointwise(score, hidden, same,
                          fe::graph::Pointwise_attributes()
                              .set_name("mask_other_documents")
                              .set_mode(fe::PointwiseMode_t::BINARY_SELECT));
}

/// What the forward and the backward share: the logits' scale, causality,
/// the window's keys (query - key < window), and the soft cap and
/// documents. cuDNN's own masks take the first three; a soft cap or
/// documents need a score modifier, which excludes those masks, so it
/// applies all of them itself (after the scale, as Twill does: cap *
/// tanh(scale * q.k / cap), then the masks). Returns the soft cap's
/// modifier, whose backward the gradient's graph adds, or null.
template <typename Attributes>
std::shared_ptr<modifiers::Softcap>
setLogits(Attributes &attributes, const SdpaProblem &p, fe::graph::Graph &graph,
          Tensor &cap) {
  attributes.set_attn_scale(float(p.scale));
  if (p.softcap <= 0 && !p.segments) {
    attributes.set_causal_mask(true);
    if (p.window > 0)
      attributes.set_diagonal_band_left_bound(int(p.window));
    return nullptr;
  }
  std::shared_ptr<modifiers::Softcap> softcap;
  if (p.softcap > 0) {
    softcap = std::make_shared<modifiers::Softcap>();
    cap = graph.tensor(float(p.softcap));
  }
  Tensor rows, columns;
  if (p.segments) {
    rows = operand(graph, kRowSegments, "row_segments",
                   {{p.batch, 1, p.seq, 1}, {p.seq, 1, 1, 1}, 4});
    columns = operand(graph, kColumnSegments, "column_segments",
                      {{p.batch, 1, 1, p.seq}, {p.seq, p.seq, p.seq, 1}, 4});
    rows->set_data_type(fe::DataType_t::INT32);
    columns->set_data_type(fe::DataType_t::INT32);
  }
  std::optional<int64_t> window;
  if (p.window > 0)
    window = p.window;
  attributes.set_score_mod([=](Graph sub, Tensor score) {
    if (softcap)
      score = softcap->forward(sub, score, cap);
    score = modifiers::sliding_window_mask(
        sub, score, fe::DiagonalAlignment_t::TOP_LEFT, window,
        /*right_bound=*/0, p.seq, p.seq, nullptr, nullptr, nullptr, nullptr);
    return rows ? sameDocument(sub, score, rows, columns) : score;
  });
  return softcap;
}

/// out and each row's log-sum-exp from q, k, v.
Graph forwardGraph(const SdpaProblem &p, int smVersion = 0) {
  Graph graph = newGraph("attention", smVersion);
  Tensor q = operand(*graph, kQuery, "q", queryLayout(p));
  Tensor k = operand(*graph, kKey, "k", kvLayout(p));
  Tensor v = operand(*graph, kValue, "v", kvLayout(p));
  auto attributes =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true);
  Tensor cap;
  setLogits(attributes, p, *graph, cap);
  auto [out, stats] = graph->sdpa(q, k, v, attributes);
  setOutput(out, kOutput, queryLayout(p));
  setOutput(stats, kStatistics, statisticsLayout(p));
  stats->set_data_type(fe::DataType_t::FLOAT);
  return graph;
}

/// dq, dk, dv from q, k, v, the output, its gradient and the statistics.
/// Not cuDNN's deterministic algorithm: before cuDNN 9.25 it needs, on
/// Hopper, a workspace of batch * heads * seq^2 * 2 bytes (16 GiB for the
/// 8B model at seq 16384) that no memory plan holds; this one's is linear
/// in seq (dq summed in fp32, in whatever order its blocks finish), so a
/// run repeats its values only to that rounding (TWILL_CUDA_ATTENTION=
/// chunked repeats them exactly).
Graph backwardGraph(const SdpaProblem &p, int smVersion = 0) {
  Graph graph = newGraph("attention_grad", smVersion);
  Tensor q = operand(*graph, kQuery, "q", queryLayout(p));
  Tensor k = operand(*graph, kKey, "k", kvLayout(p));
  Tensor v = operand(*graph, kValue, "v", kvLayout(p));
  Tensor out = operand(*graph, kOutput, "out", queryLayout(p));
  Tensor grad = operand(*graph, kOutputGrad, "grad", queryLayout(p));
  Tensor stats =
      operand(*graph, kStatistics, "statistics", statisticsLayout(p));
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto attributes =
      fe::graph::SDPA_backward_attributes().set_name("sdpa_backward");
  Tensor cap;
  if (auto softcap = setLogits(attributes, p, *graph, cap))
    attributes.set_score_mod_bprop([=](Graph sub, Tensor gradient) {
      return softcap->backward(sub, gradient, cap);
    });
  auto [dq, dk, dv] =
      graph->sdpa_backward(q, k, v, out, grad, stats, attributes);
  setOutput(dq, kQueryGrad, queryLayout(p));
  setOutput(dk, kKeyGrad, kvLayout(p));
  setOutput(dv, kValueGrad, kvLayout(p));
  return graph;
}

/// `make()`'s graph, or null with why in `why`: the frontend throws where
/// neither of its SDPA implementations supports the attributes (an I/O
/// type or input neither takes, graph_interface.h's sdpa()), which the
/// graphs here do not ask for; a future frontend's refusal is then a
/// refusal (the chunked kernel), not the end of the process.
template <typename Make> Graph madeOrWhy(Make make, std::string &why) {
  try {
    return make();
  } catch (const std::exception &error) {
    why = std::string("cudnn-frontend: ") + error.what();
    return nullptr;
  }
}

constexpr int64_t kAlignment = 256;
int64_t aligned(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

} // namespace

int64_t twill::tensorAlignment(llvm::ArrayRef<int64_t> dims,
                               llvm::ArrayRef<int64_t> strides,
                               int64_t elementBytes) {
  int64_t alignment = 16;
  for (auto [dim, stride] : llvm::zip_equal(dims, strides))
    if (dim > 1 && stride > 1)
      while ((stride * elementBytes) % alignment)
        alignment /= 2;
  return alignment;
}

llvm::Expected<SdpaProblem> twill::sdpaProblem(const AttentionShape &shape,
                                               bool bf16) {
  if (!bf16)
    return problem("fp32 values (cuDNN's fused attention takes bf16)");
  // What cuDNN 9's validation refuses (FusedAttentionTest): one query of
  // one key.
  if (shape.seq == 1)
    return problem("one token (cuDNN takes no s_q = s_kv = 1)");
  if (shape.headDim % 8 != 0 || shape.headDim > 256)
    return problem(llvm::formatv("head_dim {0} (cuDNN's fused attention "
                                 "takes multiples of 8 up to 256)",
                                 shape.headDim));
  const HeadBlock &heads = shape.heads;
  int64_t group = heads.total / shape.kvHeads;
  int64_t firstKv = heads.first / group,
          lastKv = (heads.first + heads.count - 1) / group;
  int64_t kvHeads = lastKv - firstKv + 1;
  // Each KV head in the graph serves the same number of consecutive query
  // heads: whole groups, or part of one.
  bool wholeGroups = heads.first % group == 0 && heads.count % group == 0;
  if (!wholeGroups && kvHeads != 1)
    return problem(llvm::formatv("query heads {0}..{1} split KV groups of "
                                 "{2} unevenly",
                                 heads.first, heads.first + heads.count - 1,
                                 group));
  return SdpaProblem{shape.batch,
                     shape.seq,
                     heads.count,
                     kvHeads,
                     shape.headDim,
                     heads.count * shape.headDim,
                     shape.kvHeads * shape.headDim,
                     firstKv,
                     shape.logits.window,
                     shape.logits.scale,
                     shape.logits.softcap,
                     shape.hasSegments};
}

llvm::Error twill::validateSdpaGraphs(const SdpaProblem &p, int smVersion) {
  std::string why;
  for (Graph graph :
       {madeOrWhy([&] { return forwardGraph(p, smVersion); }, why),
        madeOrWhy([&] { return backwardGraph(p, smVersion); }, why)}) {
    if (!graph)
      return problem(why);
    if (llvm::Error error = check(graph->validate(), "validate"))
      return error;
  }
  return llvm::Error::success();
}

struct FusedAttention::Graphs {
  Graph forward, backward;
  /// cuDNN's workspace for each.
  int64_t forwardBytes = 0, backwardBytes = 0;
  /// Why cuDNN built no plan for the forward or the backward on this
  /// device, if it did not.
  std::string refusal[2];
};

struct FusedAttention::State {
  cudnnHandle_t handle = nullptr;
  std::map<SdpaProblem, std::unique_ptr<Graphs>> built;
};

llvm::Expected<std::unique_ptr<FusedAttention>>
FusedAttention::create(cudaStream_t stream) {
  std::unique_ptr<FusedAttention> made(new FusedAttention());
  made->state = std::make_unique<State>();
  cudnnStatus_t status = cudnnCreate(&made->state->handle);
  if (status != CUDNN_STATUS_SUCCESS)
    return problem(llvm::Twine("cudnnCreate failed: ") +
                   cudnnGetErrorString(status));
  status = cudnnSetStream(made->state->handle, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    return problem(llvm::Twine("cudnnSetStream failed: ") +
                   cudnnGetErrorString(status));
  return std::move(made);
}

FusedAttention::~FusedAttention() {
  if (state && state->handle)
    cudnnDestroy(state->handle);
}

/// Builds `graph`'s plan (cuDNN's heuristics, then its fallback engines)
/// and gets its workspace's size into `bytes`; the error says why not.
static llvm::Error buildPlan(fe::graph::Graph &graph, cudnnHandle_t handle,
                             int64_t &bytes) {
  if (llvm::Error error =
          check(graph.build(handle, {fe::HeurMode_t::A,
                                     fe::HeurMode_t::FALLBACK}),
                "build"))
    return error;
  return check(graph.get_workspace_size(bytes), "get_workspace_size");
}

llvm::Expected<FusedAttention::Graphs *>
FusedAttention::graphs(const SdpaProblem &p, bool gradient) {
  std::unique_ptr<Graphs> &slot = state->built[p];
  if (!slot) {
    slot = std::make_unique<Graphs>();
    std::string *why = slot->refusal;
    slot->forward = madeOrWhy([&] { return forwardGraph(p); }, why[0]);
    slot->backward = madeOrWhy([&] { return backwardGraph(p); }, why[1]);
    // How long each plan took (seconds of a window's first step), and
    // which cuDNN made it.
    std::string times[2];
    for (int ofGradient : {0, 1}) {
      Graph graph = ofGradient ? slot->backward : slot->forward;
      if (!graph)
        continue;
      auto began = std::chrono::steady_clock::now();
      if (llvm::Error error =
              buildPlan(*graph, state->handle,
                        ofGradient ? slot->backwardBytes : slot->forwardBytes))
        why[ofGradient] = llvm::toString(std::move(error));
      times[ofGradient] = llvm::formatv(
          "{0:f2} s", std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - began)
                          .count());
    }
    size_t version = cudnnGetVersion();
    llvm::errs() << llvm::formatv(
        "twill: cuDNN {0}.{1}.{2} planned attention of {3} x {4} tokens, {5} "
        "heads on {6}, head_dim {7}: forward {8}, gradient {9}\n",
        version / 10000, version % 10000 / 100, version % 100, p.batch, p.seq,
        p.queryHeads, p.kvHeads, p.headDim,
        why[0].empty() ? "in " + times[0] : std::string("refused"),
        why[1].empty() ? "in " + times[1] : std::string("refused"));
  }
  if (!slot->refusal[gradient].empty())
    return problem(slot->refusal[gradient]);
  return slot.get();
}

std::string FusedAttention::refusal(const SdpaProblem &p, bool gradient,
                                    bool recompute) {
  // A gradient that recomputes the statistics runs the forward too.
  for (bool direction : {gradient, false}) {
    llvm::Expected<Graphs *> built = graphs(p, direction);
    if (!built)
      return llvm::toString(built.takeError());
    if (!(gradient && recompute))
      break;
  }
  return "";
}

/// The statistics' bytes, and where the recomputed output starts after
/// them in a backward's scratch.
static int64_t statisticsBytes(const SdpaProblem &p) {
  return aligned(p.batch * p.queryHeads * p.seq * int64_t(sizeof(float)));
}

llvm::Expected<int64_t> FusedAttention::scratchBytes(const SdpaProblem &p,
                                                     bool gradient,
                                                     bool recompute) {
  llvm::Expected<Graphs *> built = graphs(p, gradient);
  if (!built)
    return built.takeError();
  if (!gradient)
    return aligned((*built)->forwardBytes);
  if (!recompute)
    return aligned((*built)->backwardBytes);
  // The forward, then the backward, on one workspace; then the statistics
  // and the output made again.
  return aligned(std::max((*built)->forwardBytes, (*built)->backwardBytes)) +
         statisticsBytes(p) + p.batch * p.seq * p.queryRowElements * 2;
}

/// The key or value tensor's first KV head the problem uses.
static const void *firstKv(const SdpaProblem &p, const void *values) {
  return static_cast<const char *>(values) + p.firstKvHead * p.headDim * 2;
}
static void *firstKv(const SdpaProblem &p, void *values) {
  return static_cast<char *>(values) + p.firstKvHead * p.headDim * 2;
}

/// The variant pack's inputs: `in`, its KV heads from the problem's first.
static std::unordered_map<int64_t, void *> inputPack(const SdpaProblem &p,
                                                     const SdpaInputs &in) {
  std::unordered_map<int64_t, void *> pack = {
      {kQuery, const_cast<void *>(in.q)},
      {kKey, const_cast<void *>(firstKv(p, in.k))},
      {kValue, const_cast<void *>(firstKv(p, in.v))}};
  if (p.segments) // one tensor, read as rows and as columns
    pack[kRowSegments] = pack[kColumnSegments] =
        const_cast<int32_t *>(in.segments);
  return pack;
}

llvm::Error FusedAttention::forward(const SdpaProblem &p, const SdpaInputs &in,
                                    void *out, float *logSumExp,
                                    void *scratch) {
  llvm::Expected<Graphs *> built = graphs(p, false);
  if (!built)
    return built.takeError();
  std::unordered_map<int64_t, void *> pack = inputPack(p, in);
  pack[kOutput] = out;
  pack[kStatistics] = logSumExp;
  return check((*built)->forward->execute(state->handle, pack, scratch),
               "execute");
}

llvm::Error FusedAttention::backward(const SdpaProblem &p, const SdpaInputs &in,
                                     const void *out, const float *logSumExp,
                                     const void *grad, void *dq, void *dk,
                                     void *dv, void *scratch) {
  llvm::Expected<Graphs *> built = graphs(p, true);
  if (!built)
    return built.takeError();
  std::unordered_map<int64_t, void *> pack = inputPack(p, in);
  pack[kOutput] = const_cast<void *>(out);
  pack[kStatistics] = const_cast<float *>(logSumExp);
  if (!logSumExp) { // the baseline: the forward again, for both
    llvm::Expected<Graphs *> forward = graphs(p, false);
    if (!forward)
      return forward.takeError();
    char *workspace = static_cast<char *>(scratch);
    char *statistics = workspace + aligned(std::max((*built)->forwardBytes,
                                                    (*built)->backwardBytes));
    pack[kOutput] = statistics + statisticsBytes(p);
    pack[kStatistics] = statistics;
    if (llvm::Error error = check(
            (*forward)->forward->execute(state->handle, pack, workspace),
            "execute the forward for its statistics"))
      return error;
  }
  pack[kOutputGrad] = const_cast<void *>(grad);
  pack[kQueryGrad] = dq;
  pack[kKeyGrad] = firstKv(p, dk);
  pack[kValueGrad] = firstKv(p, dv);
  return check((*built)->backward->execute(state->handle, pack, scratch),
               "execute");
}
