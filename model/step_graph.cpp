#include "model/step_graph.hpp"

#include <algorithm>

#include "hardware/kernel_shapes.hpp"
#include "model/accounting.hpp"

namespace twin::model {

using hardware::grid_stride_shape;
using hardware::grid_work;

namespace {
constexpr const char* kStreamNames[] = {"compute", "dense_pg",   "expert_pg", "ep_pg",
                                        "node_pg", "replica_pg", "d2h",       "h2d",
                                        "side",    "cpu",        "tp_pg"};
// Each communicator's stream, in Comm's order.
constexpr Stream kStreamOf[] = {kDensePg, kExpertPg, kEpPg, kNodePg, kReplicaPg, kTpPg};
static_assert(std::size(kStreamOf) == static_cast<std::size_t>(Comm::count));
static_assert(sizeof(kStreamNames) / sizeof(kStreamNames[0]) == kStreamCount);
}  // namespace

const char* stream_name(std::int32_t s) {
  return s >= 0 && s < kStreamCount ? kStreamNames[s] : "?";
}

StepBuilder::StepBuilder(const Job& job, const hardware::NcclOptions& nccl,
                         const hardware::Cluster& cluster, sim::TaskGraph& graph)
    : job_(job),
      c_(cluster),
      g_(graph),
      cost_(cluster.profile()),
      work_(build_workload(job)),
      ranks_(cluster.gpus()),
      last_(static_cast<std::size_t>(ranks_)),
      all_gather_stream_(static_cast<std::size_t>(ranks_), nullptr),
      comms_(plan_comms(job, nccl, static_cast<int>(cluster.profile().gpu.sm_count))),
      pgs_(process_groups(job.parallel, static_cast<int>(ranks_), cluster.gpus_per_node(),
                          cluster.copies())),
      mem_(ranks_),
      held_(static_cast<std::size_t>(ranks_ * job.model.layers)),
      local_shard_(static_cast<std::size_t>(ranks_ * job.model.layers), 0) {
  for (auto& l : last_) l.fill(nullptr);
  const auto& eff = cluster.profile().efficiency;
  weigh_attention(work_, job.model, eff.attention_fwd_half_tokens, eff.attention_bwd_half_tokens);
}

std::optional<FusedParts> StepBuilder::parts(std::size_t task_id) const {
  if (task_id >= fused_index_.size() || fused_index_[task_id] < 0) return std::nullopt;
  const auto k = static_cast<std::size_t>(fused_index_[task_id]);
  return FusedParts{{fused_parts_.data() + fused_begin_[k], fused_begin_[k + 1] - fused_begin_[k]},
                    &ops_.parts[fused_kernels_[k]]};
}

const std::vector<Launch>* StepBuilder::launches(std::size_t task_id) const {
  const auto it = launches_.find(task_id);
  return it == launches_.end() ? nullptr : &it->second;
}

void StepBuilder::note(std::int64_t rank, const sim::Task& t, std::initializer_list<Launch> l) {
  if (records(rank)) launches_[t.id()] = l;
}

void StepBuilder::note(std::int64_t rank, const sim::Task& t, std::vector<Launch> l) {
  if (records(rank)) launches_[t.id()] = std::move(l);
}

void StepBuilder::fuse(std::size_t j0, std::size_t j1, const std::vector<std::vector<Op>>& ops,
                       std::int32_t layer) {
  if (j1 - j0 == 1) {
    for (std::int64_t r = 0; r < ranks_; ++r) {
      const Op& op = ops[static_cast<std::size_t>(r)][j0];
      note(r, kernel(r, op.name, op.category, op.work, layer), {op.launch});
    }
    return;
  }
  std::string name;
  for (std::size_t j = j0; j < j1; ++j) name += (j > j0 ? "+" : "") + std::string(ops[0][j].name);
  const char* n = names_.emplace_back(std::move(name)).c_str();
  std::vector<hardware::KernelPart> parts;
  for (std::int64_t r = 0; r < ranks_; ++r) {
    parts.clear();
    for (std::size_t j = j0; j < j1; ++j) {
      const Op& op = ops[static_cast<std::size_t>(r)][j];
      fused_parts_.emplace_back(op.category, op.work.alone_s);
      parts.push_back({op.work.shape, op.work.alone_s, op.work.hbm_bytes});
    }
    auto& t = task(r, kCompute, n, kFused, layer);
    record_fused(t, r, parts);
    if (records(r)) {
      std::vector<Launch> ls;
      for (std::size_t j = j0; j < j1; ++j)
        ls.push_back(ops[static_cast<std::size_t>(r)][j].launch);
      note(r, t, std::move(ls));
    }
    if (fused_index_.size() <= t.id()) fused_index_.resize(t.id() + 1, -1);
    fused_index_[t.id()] = static_cast<std::int32_t>(fused_begin_.size() - 1);
    fused_kernels_.push_back(ops_.fused[ops_.fused.size() - 1].first);
    fused_begin_.push_back(static_cast<std::uint32_t>(fused_parts_.size()));
  }
}

sim::Task& StepBuilder::task(std::int64_t rank, Stream s, const char* name, Category c,
                             std::int32_t layer) {
  sim::Task& t = g_.add(name, lane_of(rank, s), c, layer);
  auto& last = last_[static_cast<std::size_t>(rank)][s];
  if (last) t.after(*last);
  last = &t;
  return t;
}

sim::Task& StepBuilder::kernel(std::int64_t rank, const char* name, Category c,
                               hardware::KernelWork w, std::int32_t layer, Stream s) {
  sim::Task& t = task(rank, s, name, c, layer);
  w.priority = s == kCompute ? hardware::Gpu::Priority::normal : side_priority();
  ops_.kernels.emplace_back(task_id(t), static_cast<std::int32_t>(rank), w);
  return t;
}

sim::Task& StepBuilder::kernels(std::int64_t rank, const char* name, Category c,
                                std::span<const hardware::KernelPart> parts, std::int32_t layer) {
  sim::Task& t = task(rank, kCompute, name, c, layer);
  record_fused(t, rank, parts);
  return t;
}

void StepBuilder::record_fused(const sim::Task& t, std::int64_t rank,
                               std::span<const hardware::KernelPart> parts) {
  const auto first = ops_.parts.append_run(parts.begin(), parts.end());
  ops_.fused.emplace_back(task_id(t), static_cast<std::int32_t>(rank),
                          static_cast<std::uint32_t>(first),
                          static_cast<std::uint32_t>(parts.size()));
}

namespace {

// Each collective's category in the reports, in StepColl's order.
constexpr Category kCategoryOf[] = {kCollDenseGather,      kCollDenseReduce,   kCollDenseGather,
                                    kCollExpertGather,     kCollExpertReduce,  kCollEpAllToAll,
                                    kCollReplicaAllReduce, kCollNormAllReduce, kCollTpAllGather,
                                    kCollTpReduceScatter,  kCollFloat8Amax};
static_assert(std::size(kCategoryOf) == static_cast<std::size_t>(StepColl::count));
// Whether FSDP issues it on one of its streams (in StepColl's order): the gathers and gradient
// reductions. The rest run on NCCL's internal streams (functional collectives: the EP and TP
// exchanges) or the compute stream, at normal priority; HSDP's all-reduce stream FSDP2 creates
// at the default priority.
constexpr bool kOnFsdpStream[] = {true,  true,  true,  true,  true, false,
                                  false, false, false, false, false};
static_assert(std::size(kOnFsdpStream) == static_cast<std::size_t>(StepColl::count));

}  // namespace

StepBuilder::PerRank StepBuilder::collective(StepColl which, double bytes, const char* name,
                                             std::int32_t layer) {
  const auto& pc = comms_[which];
  const auto s = kStreamOf[static_cast<std::size_t>(pc.comm)];
  const Category c = kCategoryOf[static_cast<std::size_t>(which)];
  // A collective this job does not run (a dense model's expert collectives) is a marker on its
  // stream: the graph keeps its shape, and nothing moves.
  if (!pc.in_job) return marker(s, name, layer);
  PerRank out(static_cast<std::size_t>(ranks_), nullptr);
  for (const auto& grp : pgs_[pc.comm]) {
    const auto first = static_cast<std::uint32_t>(g_.size());  // the group's tasks: consecutive
    for (int r : grp) out[static_cast<std::size_t>(r)] = &task(r, s, name, c, layer);
    if (!launch_ranks_.empty()) {
      Launch l{Launch::kCollective};
      l.ctas = pc.ctas;
      l.bytes = bytes;
      l.coll = pc.kind;
      l.comm = pc.comm;
      l.group_id = static_cast<std::int32_t>(&grp - pgs_[pc.comm].data());
      l.group = &grp;
      for (int r : grp) note(r, *out[static_cast<std::size_t>(r)], {l});
      if (grp.size() > 1 &&
          std::any_of(grp.begin(), grp.end(), [&](int r) { return records(r); })) {
        auto& ids = peers_.emplace_back();
        for (std::size_t j = 0; j < grp.size(); ++j) ids.push_back(first + j);
      }
    }
    ops_.collectives.emplace_back(
        first, pc.kind, pc.ctas, pc.comm == Comm::replica && pgs_.replicas_are_copies, bytes, &grp,
        kOnFsdpStream[static_cast<std::size_t>(which)] ? side_priority()
                                                       : hardware::Gpu::Priority::normal);
  }
  return out;
}

sim::Task& StepBuilder::copy(std::int64_t rank, bool to_host, const char* name, std::int32_t layer,
                             double bytes) {
  auto& t = task(rank, to_host ? kD2H : kH2D, name, to_host ? kCopyD2H : kCopyH2D, layer);
  ops_.copies.emplace_back(task_id(t), static_cast<std::int32_t>(rank),
                           to_host ? hardware::CopyDir::d2h : hardware::CopyDir::h2d, bytes);
  Launch l{to_host ? Launch::kCopyD2H : Launch::kCopyH2D};
  l.bytes = bytes;
  note(rank, t, {l});
  return t;
}

sim::Task& StepBuilder::elementwise(std::int64_t rank, const char* name, hardware::Family f,
                                    double bytes, std::int32_t layer, Category c, Stream s) {
  auto& t = kernel(rank, name, c, elementwise_op(job_, cost_, f, bytes), layer, s);
  note(rank, t, {elementwise_launch(bytes)});
  return t;
}

std::int32_t StepBuilder::gather_pool() const {
  return job_.training.unshard_async_op ? kPoolCompute : kPoolAllGather;
}

void StepBuilder::unshard(std::int64_t r, double flat, double weights, const sim::Task& gather,
                          const sim::Task& use_begin, const sim::Task& use_end) {
  const auto f = mem_.alloc(r, "all_gather_output", gather_pool(), flat, gather, BufferLog::kStart);
  const auto w =
      mem_.alloc(r, "unsharded_weights", kPoolCompute, weights, use_begin, BufferLog::kStart);
  mem_.free(r, f, use_begin, BufferLog::kEnd);  // after the copy-out
  mem_.free(r, w, use_end, BufferLog::kEnd);
}

void StepBuilder::queue_on(const PerRank& tasks, PerRank& stream) const {
  for (std::size_t r = 0; r < tasks.size(); ++r) {
    if (!tasks[r]) continue;
    if (stream[r]) tasks[r]->after(*stream[r]);
    stream[r] = tasks[r];
  }
}

StepBuilder::PerRank StepBuilder::fsdp_gather(StepColl which, double bytes, const char* name,
                                              std::int32_t layer) {
  auto out = collective(which, bytes, name, layer);
  if (fsdp2_streams() && !job_.training.unshard_async_op) queue_on(out, all_gather_stream_);
  return out;
}

void StepBuilder::after_all(PerRank& tasks, const PerRank& preds) {
  if (preds.empty()) return;  // none on any rank (e.g. copies that are switched off)
  for (std::size_t r = 0; r < tasks.size(); ++r)
    if (tasks[r] && preds[r]) tasks[r]->after(*preds[r]);
}

StepBuilder::PerRank StepBuilder::marker(Stream s, const char* name, std::int32_t layer) {
  PerRank out(static_cast<std::size_t>(ranks_));
  for (std::int64_t r = 0; r < ranks_; ++r)
    out[static_cast<std::size_t>(r)] = &task(r, s, name, kMarker, layer);
  return out;
}

// A layer collective (EP all-to-all, TP all-gather or reduce-scatter) on the compute stream's
// path: it waits for the compute stream, and the compute stream for it.
void StepBuilder::blocking_collective(StepColl which, double bytes, const char* name,
                                      std::int32_t layer) {
  auto ts = collective(which, bytes, name, layer);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    auto& last = last_[static_cast<std::size_t>(r)][kCompute];
    if (last) ts[static_cast<std::size_t>(r)]->after(*last);
    last = ts[static_cast<std::size_t>(r)];
  }
}

// Tensor parallelism's blocking collective of a rank's activations (T·h bf16) outside the
// layers (embedding, head); nothing without tensor parallelism.
void StepBuilder::tp_activations(StepColl which, const char* name, std::int32_t layer) {
  if (job_.parallel.tp == 1) return;
  blocking_collective(which, work_[0].tokens * static_cast<double>(job_.model.hidden) * kBf16, name,
                      layer);
}

// FP8 all-gather without precomputed scales: before each gather of a layer, torchao's
// pre-all-gather hook all-reduces the amax of each linear weight's shard over the shard group
// (one small all-reduce per weight, queued on the gathering group's stream).
void StepBuilder::float8_amax_before_gather(std::int32_t layer) {
  const auto& t = job_.training;
  if (!t.float8 || !t.float8_all_gather || t.float8_precompute_scale) return;
  for (int w = 0; w < linear_weights_per_layer(); ++w)
    collective(StepColl::float8_amax, 4, "float8_amax_all_reduce", layer);
}

int StepBuilder::linear_weights_per_layer() const {
  return 4 + (job_.model.ffn_hidden > 0 ? 3 : 0);  // q, k, v, o; gate, up, down
}

double StepBuilder::vocab_shard() const {
  return static_cast<double>(job_.model.vocab) / static_cast<double>(job_.parallel.tp);
}

// Async TP (TorchTitan's micro-pipelined collective matmuls): a collective cut into tp chunks
// overlaps the GEMM that consumes (all-gather) or produces (reduce-scatter) it. Modelled as two
// collectives on the TP stream: one chunk exposed on the compute stream (before the GEMM for a
// gather, after it for a reduce-scatter) and the other (tp − 1)/tp of the bytes beside the GEMM,
// issued when the GEMM may start; the op after a gathering GEMM waits for the gather's rest.
StepBuilder::PerRank StepBuilder::overlapped_part(StepColl which, double bytes, const char* name,
                                                  std::int32_t layer) {
  const double tp = static_cast<double>(job_.parallel.tp);
  auto part = collective(which, bytes * (tp - 1) / tp, name, layer);
  for (std::int64_t r = 0; r < ranks_; ++r)
    if (auto* last = last_[static_cast<std::size_t>(r)][kCompute])
      part[static_cast<std::size_t>(r)]->after(*last);
  return part;
}

namespace {
StepColl coll_of(std::int32_t category) {
  return category == kCollEpAllToAll    ? StepColl::ep_all_to_all
         : category == kCollTpAllGather ? StepColl::tp_all_gather
                                        : StepColl::tp_reduce_scatter;
}
}  // namespace

// One layer collective of an op list, blocking the compute stream; under async TP its exposed
// chunk, and for a gather the rest beside the next GEMM, which is returned (else empty).
StepBuilder::PerRank StepBuilder::layer_collective(const Op& op, std::int32_t layer) {
  const bool split =
      job_.training.async_tp && job_.parallel.tp > 1 && op.category != kCollEpAllToAll;
  const double tp = static_cast<double>(job_.parallel.tp);
  blocking_collective(coll_of(op.category), split ? op.coll_bytes / tp : op.coll_bytes, op.name,
                      layer);
  if (split && op.category == kCollTpAllGather)
    return overlapped_part(StepColl::tp_all_gather, op.coll_bytes, op.name, layer);
  return {};
}

// Op j of every rank as a kernel of its own; the first expert GEMM (given the expert weights'
// gathers) waits for them and, gathered in FP8, for their dequantization.
void StepBuilder::run_op(const std::vector<std::vector<Op>>& ops, std::size_t j, std::int32_t layer,
                         const PerRank* weights_expert) {
  const auto comm = layer_comm(job_, layer);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    if (weights_expert && job_.training.fsdp_copies)
      elementwise(r, "expert_copy_out", hardware::Family::ew_add, 2 * comm.expert_gather, layer)
          .after(*(*weights_expert)[ri]);
    if (weights_expert && job_.training.expert_gather_dtype == GatherDtype::fp8) {
      // Dequantize: read FP8 values and scales, write bf16 (JOB.md §6.8).
      elementwise(r, "fp8_dequant", hardware::Family::ew_fp8_dequant,
                  comm.expert_gather + 2 * comm.expert_elems, layer)
          .after(*(*weights_expert)[ri]);
    }
    const Op& op = ops[ri][j];
    auto& t = kernel(r, op.name, op.category, op.work, layer);
    note(r, t, {op.launch});
    if (weights_expert) t.after(*(*weights_expert)[ri]);
  }
}

namespace {
// The op that ends the experts' module in an op list (its size if none): their last GEMM, or the
// EP all-to-all right after it — FSDP2's hooks run outside TorchTitan's ExpertParallel hooks
// (fully_shard prepends its forward pre-hook), so in backward the experts' post-backward
// follows the dispatch's all-to-all.
std::size_t experts_module_end(const std::vector<Op>& ops) {
  std::size_t end = ops.size();
  for (std::size_t k = 0; k < ops.size(); ++k)
    if (ops[k].category == kExpertGemm) end = k;
  if (end + 1 < ops.size() && ops[end + 1].category == kCollEpAllToAll) ++end;
  return end;
}
}  // namespace

// Runs one op list (index-aligned over ranks) on the compute stream. Layer collectives run on
// their group's stream and the compute stream waits for them (async TP: overlapped_part).
// The first expert GEMM waits for the expert weights (and their FP8 dequantization).
void StepBuilder::run_ops(const std::vector<std::vector<Op>>& ops, std::int32_t layer,
                          const PerRank& weights_expert,
                          const std::function<void()>& after_experts) {
  bool weights_pending = !weights_expert.empty();
  const std::size_t n = ops[0].size();
  const std::size_t experts_end = experts_module_end(ops[0]);
  const auto experts_done = [&](std::size_t j0, std::size_t j1) {
    if (after_experts && experts_end >= j0 && experts_end < j1) after_experts();
  };
  const bool async = job_.training.async_tp && job_.parallel.tp > 1;
  const auto is = [&](std::size_t k, Category c) { return k < n && ops[0][k].category == c; };
  // The GEMM beside an async collective runs as a task of its own.
  const auto beside_async = [&](std::size_t k) {
    return async && ((k > 0 && is(k - 1, kCollTpAllGather)) || is(k + 1, kCollTpReduceScatter));
  };
  PerRank gather_rest;  // the rest of an async gather, awaited after its GEMM
  for (std::size_t j = 0; j < n; ++j) {
    const Op& shape = ops[0][j];
    if (is_layer_collective(shape.category)) {
      if (auto rest = layer_collective(shape, layer); !rest.empty()) gather_rest = std::move(rest);
      experts_done(j, j + 1);
      continue;
    }
    if (async && is(j + 1, kCollTpReduceScatter))
      overlapped_part(StepColl::tp_reduce_scatter, ops[0][j + 1].coll_bytes, ops[0][j + 1].name,
                      layer);
    const bool first_expert = shape.category == kExpertGemm && weights_pending;
    const auto fusible = [&](std::size_t k) {
      const Op& o = ops[0][k];
      return o.coll_bytes <= 0 && o.work.cls == hardware::KernelClass::grid &&
             !(o.category == kExpertGemm && weights_pending) && !beside_async(k);
    };
    if (fusible(j)) {
      std::size_t j1 = j + 1;
      while (j1 < ops[0].size() && fusible(j1)) ++j1;
      fuse(j, j1, ops, layer);
      experts_done(j, j1);
      j = j1 - 1;
      continue;
    }
    run_op(ops, j, layer, first_expert ? &weights_expert : nullptr);
    if (first_expert) weights_pending = false;
    experts_done(j, j + 1);
    if (!gather_rest.empty()) {
      auto join = marker(kCompute, "tp_gather_overlap_end", layer);
      after_all(join, gather_rest);
      gather_rest.clear();
    }
  }
}

}  // namespace twin::model
