// The task graph of one training step of a TorchTitan FSDP2 + expert-parallel MoE job, every
// rank simulated (JOB.md §4–§6). Streams are in-order chains of tasks; collectives of one
// process group (PG) serialize on that PG's internal stream, per rank; cross-stream waits are
// edges. FSDP2's rules, as modelled:
//  - forward: layer i+1's all-gathers are issued when layer i starts (explicit prefetch), and at
//    most two gathered layers are alive, so gathering i+1 also waits for layer i−1's end;
//  - backward: activations (H2D) and weights (re-gather) of layer i are prefetched when layer
//    i+1's backward starts; after layer i's backward the compute stream waits for layer i+1's
//    gradient reduction (the FSDP2 stall of JOB.md §5), then layer i's reductions are issued;
//  - the optimizer runs on the host after the last gradient reached it (step_optimizer.cpp).
// The builder emits data only — tasks and edges, buffer events (step_memory.hpp), each task's work
// (step_ops.hpp) — and touches no hardware: bind_step() attaches the work to a machine.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/collective.hpp"
#include "hardware/kernel_cost.hpp"
#include "model/comm_plan.hpp"
#include "model/job.hpp"
#include "model/step_costs.hpp"
#include "model/step_memory.hpp"
#include "model/step_ops.hpp"
#include "model/workload.hpp"
#include "sim/task.hpp"

namespace twin::model {

enum Stream : std::int32_t {
  kCompute,
  kDensePg,
  kExpertPg,
  kEpPg,
  kNodePg,
  kReplicaPg,
  kD2H,
  kH2D,
  kSideStream,
  kCpu,
  kTpPg,  // after the others: a stream added later keeps the earlier ones' numbers
  kStreamCount
};
const char* stream_name(std::int32_t s);
inline std::int32_t lane_of(std::int64_t rank, Stream s) {
  return static_cast<std::int32_t>(rank) * kStreamCount + s;
}

// Consecutive grid kernels of a compute stream run as one task: in the engine's model they are
// one fluid flow either way (same class, same resources; HBM at the run's mean rate, where each
// kernel would draw its own), and one task is much cheaper to simulate. The task keeps its parts so
// that reports can attribute its time by category, in proportion to each part's time alone.
struct FusedParts {
  std::span<const std::pair<Category, double>> parts;  // (category, alone seconds)
  // The same parts as the machine ran them: each one's power_slowdown (hardware/power.hpp).
  const hardware::KernelPart* kernels = nullptr;
  // Calls f(category, seconds) for each part: its share of the task's `seconds`, in proportion
  // to the parts' times alone under the power cap's clock (0 for all if they take none).
  template <class F>
  void split(double seconds, F&& f) const {
    double alone = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) alone += weight(k);
    for (std::size_t k = 0; k < parts.size(); ++k)
      f(parts[k].first, alone > 0 ? seconds * weight(k) / alone : 0.0);
  }
  double weight(std::size_t k) const {
    return kernels ? parts[k].second * kernels[k].power_slowdown : parts[k].second;
  }
};

struct StepMarks {
  std::vector<sim::Task*> backward_end;  // per rank: last gradient on the host
  // Per rank: where optimizer.step() begins, after the gradient norm and clip (PyTorch's
  // profiler records it as Optimizer.step#…, clip_grad_norm_ outside it).
  std::vector<sim::Task*> optimizer_step_start;
  std::vector<sim::Task*> optimizer_end;  // per rank
};

class StepBuilder {
 public:
  StepBuilder(const Job& job, const hardware::NcclOptions& nccl, const hardware::Cluster& cluster,
              sim::TaskGraph& graph);
  StepMarks build();
  const std::vector<RankWorkload>& workload() const { return work_; }
  // Parts of a fused task (category kFused), by task id; none for other tasks.
  std::optional<FusedParts> parts(std::size_t task_id) const;
  // Every HBM buffer of the step, per rank, against the tasks that allocate and free it.
  const BufferLog& buffers() const { return mem_; }
  // What each task does (step_ops.hpp): bind_step() attaches it to the machine.
  const StepOps& ops() const { return ops_; }
  // Keeps what a real GPU would launch for each kernel task of these ranks (call before build()).
  void record_launches(const std::vector<std::int64_t>& ranks) {
    for (const auto r : ranks) {
      if (r < 0) continue;
      if (launch_ranks_.size() <= static_cast<std::size_t>(r))
        launch_ranks_.resize(static_cast<std::size_t>(r) + 1);
      launch_ranks_[static_cast<std::size_t>(r)] = true;
    }
  }
  // The launches of a recorded task (several for a fused task), or null.
  const std::vector<Launch>* launches(std::size_t task_id) const;
  // Each collective with a recorded rank among its peers: its peers' task ids (traces draw who
  // waited for whom).
  const std::vector<std::vector<std::size_t>>& collective_peers() const { return peers_; }

 private:
  using PerRank = std::vector<sim::Task*>;

  sim::Task& task(std::int64_t rank, Stream s, const char* name, Category c, std::int32_t layer);
  sim::Task& kernel(std::int64_t rank, const char* name, Category c, hardware::KernelWork w,
                    std::int32_t layer, Stream s = kCompute);
  // One elementwise kernel of family f moving `bytes` (read + written), its launch noted.
  sim::Task& elementwise(std::int64_t rank, const char* name, hardware::Family f, double bytes,
                         std::int32_t layer, Category c = kElementwise, Stream s = kCompute);
  // FSDP2's copies on the compute stream (torch/distributed/fsdp/_fully_shard/
  // _fsdp_collectives.py): after an all-gather, foreach_all_gather_copy_out splits the flat
  // output into the parameters (wait_for_unshard: read and write the gathered bytes); before a
  // reduction, foreach_reduce_scatter_copy_in packs the unsharded gradients into the reduce
  // input, cast to the reduce dtype. The dense copy-out is an op of the layer's op lists
  // (step_costs.cpp layer_ops, fused with the next), the expert one a kernel after its gather
  // (run_op); the copy-in is every rank's one task before layer i's dense and/or expert
  // gradient reductions (none when training.fsdp_copies is off).
  PerRank reduce_copy_in(std::int32_t layer, bool dense, bool expert);
  // Several kernels back to back as one task of category c (ops.hpp's run_fused).
  sim::Task& kernels(std::int64_t rank, const char* name, Category c,
                     std::span<const hardware::KernelPart> parts, std::int32_t layer);
  // Collective `which` of the comm plan, one per process group of its communicator; returns
  // each participating rank's task (else null).
  PerRank collective(StepColl which, double bytes, const char* name, std::int32_t layer);
  // FSDP2 issues every group's all-gathers from one all_gather_stream and every reduce-scatter
  // from one reduce_scatter_stream (FSDPCommContext, shared by all FSDP states of the model);
  // a collective issued with async_op=False makes its issuing stream wait for its end (c10d's
  // Work.wait), so those of different groups (dense, experts, node-local) run one after another.
  // queue_on orders `tasks` after what `stream` last held and makes them its last.
  void queue_on(const PerRank& tasks, PerRank& stream) const;
  // training.fsdp_streams = fsdp2: the ordering above; per_group: none beyond each process
  // group's own NCCL stream (as if FSDP issued every collective with async_op=True).
  bool fsdp2_streams() const { return job_.training.fsdp_streams == FsdpStreams::fsdp2; }
  // The priority of FSDP's streams (hardware/gpu.hpp: who gets an SM first): FSDP2 creates them
  // at −1 (`FSDPCommContext.lazy_init`); FSDP1 at the default unless HSDP limits its gathers.
  hardware::Gpu::Priority side_priority() const {
    return job_.training.side_stream_priority == StreamPriority::high
               ? hardware::Gpu::Priority::high
               : hardware::Gpu::Priority::normal;
  }
  // An FSDP all-gather: under fsdp2 on the all_gather_stream, unless unshard_async_op issues it
  // from the compute stream with async_op=True (rung 12b).
  PerRank fsdp_gather(StepColl which, double bytes, const char* name, std::int32_t layer);
  void after_all(PerRank& tasks, const PerRank& preds);
  static std::uint32_t task_id(const sim::Task& t) { return static_cast<std::uint32_t>(t.id()); }
  void record_fused(const sim::Task& t, std::int64_t rank,
                    std::span<const hardware::KernelPart> parts);

  void forward(std::vector<PerRank>& begin, std::vector<PerRank>& end, PerRank& d2h);
  // forward's named steps (step_passes.cpp).
  void forward_embedding();
  void forward_layer_buffers(std::int64_t r, std::int32_t i, const sim::Task& gather_d,
                             const sim::Task& gather_e, const sim::Task& begin, sim::Task& end,
                             PerRank& d2h_all);
  // `after_experts`, if given, runs once the list's last expert GEMM is on the compute stream
  // (the experts' FSDP post-backward hook fires there).
  void run_ops(const std::vector<std::vector<Op>>& ops, std::int32_t layer,
               const PerRank& weights_expert, const std::function<void()>& after_experts = {});
  void run_op(const std::vector<std::vector<Op>>& ops, std::size_t j, std::int32_t layer,
              const PerRank* weights_expert);
  void blocking_collective(StepColl which, double bytes, const char* name, std::int32_t layer);
  PerRank overlapped_part(StepColl which, double bytes, const char* name, std::int32_t layer);
  PerRank layer_collective(const Op& op, std::int32_t layer);
  void tp_activations(StepColl which, const char* name, std::int32_t layer);
  double vocab_shard() const;  // the embedding's and head's rows on one TP rank
  void float8_amax_before_gather(std::int32_t layer);
  int linear_weights_per_layer() const;
  void backward(const std::vector<PerRank>& fwd_end, const PerRank& d2h, PerRank& grads_home);
  // backward's named steps (step_backward.cpp).
  struct BackwardState;
  struct Fetch {
    PerRank h2d, dense, expert;  // a layer's reloaded activation, dense and expert weights
  };
  PerRank backward_head(const PerRank& last_fwd_end, BackwardState& st);
  Fetch prefetch_layer(std::int32_t i, const PerRank& issue_at, const PerRank& d2h_all);
  void layer_boundary_buffers(std::int32_t i, const Fetch& cur, const PerRank& begin,
                              const PerRank& boundary, BackwardState& st);
  void reduce_expert_grads(std::int32_t i, const PerRank& issue_at, BackwardState& st);
  PerRank dense_reduce_scatter(std::int32_t i, const PerRank& boundary, BackwardState& st);
  void send_reduced_home(std::int32_t i, const PerRank& rsd, BackwardState& st);
  void embedding_regather(const PerRank& boundary);
  void backward_embedding(BackwardState& st, PerRank& grads_home);
  PerRank marker(Stream s, const char* name, std::int32_t layer);
  void build_optimizer(const PerRank& grads_home, StepMarks& marks);
  // build_optimizer's named steps (step_optimizer.cpp).
  void grad_norm(const PerRank& grads_home, double shard);
  PerRank gpu_optimizer(const PerRank& grads_home, double shard);  // → optimizer.step() begins
  void float8_precompute(double shard);
  void muon_newton_schulz(double muon_elems);
  void newton_schulz_gpu(std::int64_t r, double owned_expert,
                         std::span<const hardware::KernelPart> dense_parts, double dense_own,
                         sim::Task& gathered);
  // CPU work of `seconds_alone` on `threads` of the rank's cores (0: all of them).
  sim::Task& cpu(std::int64_t rank, const char* name, double seconds_alone, double threads = 0);
  // A gloo collective on CPU tensors over each dense group: on the rank's CPU thread, or, with
  // `worker`, on gloo's worker thread (async_op=True: the CPU thread goes on; the task sits on
  // the CPU lane outside its order, after what the thread last did).
  PerRank cpu_collective(hardware::CpuCollKind kind, double bytes, const char* name, bool worker);
  // A host↔device copy on the D2H or H2D stream.
  sim::Task& copy(std::int64_t rank, bool to_host, const char* name, std::int32_t layer,
                  double bytes);
  // Buffers of gathered weights: the flat all-gather output (allocated when the gather starts,
  // in the all-gather pool) is copied out into the weight tensors when `use_begin` starts
  // (compute pool); those are freed when `use_end` ends (FSDP2 reshard).
  void unshard(std::int64_t r, double flat, double weights, const sim::Task& gather,
               const sim::Task& use_begin, const sim::Task& use_end);
  std::int32_t gather_pool() const;

  const Job& job_;
  const hardware::Cluster& c_;  // its shape and profile only: binding is bind_step's
  sim::TaskGraph& g_;
  hardware::KernelCost cost_;
  std::vector<RankWorkload> work_;
  std::int64_t ranks_;
  std::vector<std::array<sim::Task*, kStreamCount>> last_;
  PerRank all_gather_stream_;  // FSDP2's all_gather_stream: the all-gather it last waited for
  CommPlan comms_;
  ProcessGroups pgs_;
  // Fused tasks' parts, flat: task id → its parts fused_parts_[fused_begin_[k] .. +count],
  // k = fused_index_[id] (−1: not fused; the count is fused_begin_[k + 1] − fused_begin_[k]).
  std::vector<std::int32_t> fused_index_;
  std::vector<std::uint32_t> fused_begin_{0};
  std::vector<std::pair<Category, double>> fused_parts_;
  std::vector<std::uint32_t> fused_kernels_;  // by fused entry: its first part in ops_.parts
  std::deque<std::string> names_;             // names of fused tasks (tasks hold const char*)
  BufferLog mem_;
  StepOps ops_;
  std::vector<bool> launch_ranks_;  // ranks whose launches are kept
  bool records(std::int64_t r) const {
    return r >= 0 && static_cast<std::size_t>(r) < launch_ranks_.size() &&
           launch_ranks_[static_cast<std::size_t>(r)];
  }
  std::map<std::size_t, std::vector<Launch>> launches_;
  std::vector<std::vector<std::size_t>> peers_;
  // Records t's launches when `rank` is the one recorded (a list: no allocation otherwise).
  void note(std::int64_t rank, const sim::Task& t, std::initializer_list<Launch> l);
  void note(std::int64_t rank, const sim::Task& t, std::vector<Launch> l);
  // Buffers kept from forward to layer i's backward, freed when its backward ends ([r·L + i]).
  std::vector<std::vector<std::size_t>> held_;
  std::vector<std::size_t> local_shard_;  // node-local dense reshard of layer i, [r·L + i]
  void fuse(std::size_t j0, std::size_t j1, const std::vector<std::vector<Op>>& ops,
            std::int32_t layer);
};

}  // namespace twin::model
