#include "model/job.hpp"

#include <fmt/format.h>

namespace twin::model {

const sim::Schema<ParallelPlan>& parallel_schema() {
  static const sim::Schema<ParallelPlan> s = [] {
    sim::Schema<ParallelPlan> s;
    s.integer("replica_gpus", "GPUs", 1, 1e6, std::nullopt,
              "GPUs of one replica: the FSDP shard group of dense weights (384 on JUPITER)",
              [](auto& p) -> auto& { return p.replica_gpus; })
        .integer("ep", "GPUs", 1, 1024, 4,
                 "expert parallelism inside a node: each GPU owns experts/ep experts per layer",
                 [](auto& p) -> auto& { return p.ep; })
        .integer("dp", "", 1, 100000, 1,
                 "data-parallel replicas (HSDP); total GPUs = replica_gpus × dp",
                 [](auto& p) -> auto& { return p.dp; });
    return s;
  }();
  return s;
}

const sim::Schema<TrainingOptions>& training_schema() {
  static const sim::Schema<TrainingOptions> s = [] {
    sim::Schema<TrainingOptions> s;
    s.integer("seq_len", "tokens", 1, 1 << 24, 65536, "tokens per sequence (row)",
              [](auto& t) -> auto& { return t.seq_len; })
        .integer("rows_per_gpu", "rows", 1, 4096, 1, "sequences per GPU per step",
                 [](auto& t) -> auto& { return t.rows_per_gpu; })
        .choice("activation_checkpointing", {"none", "selective", "full"}, "full",
                "none: keep every activation; selective: TorchTitan's per-op policy (every "
                "second matmul output saved); full: keep only each layer's output (rung 1)",
                [](auto& t) -> auto& { return t.activation_checkpointing; })
        .real("offload_fraction", "", 0, 1, 0.86,
              "share of layers whose checkpointed output is offloaded to the host over C2C (rung 2)",
              [](auto& t) -> auto& { return t.offload_fraction; })
        .choice("optimizer", {"adamw", "muon"}, "muon",
                "adamw for everything, or Muon for matrices except the router + AdamW (rung 3)",
                [](auto& t) -> auto& { return t.optimizer; })
        .boolean("cpu_offload", true,
                 "FSDP2 CPUOffloadPolicy: sharded params, grads and optimizer states on the host",
                 [](auto& t) -> auto& { return t.cpu_offload; });
    return s;
  }();
  return s;
}

const sim::Schema<DataOptions>& data_schema() {
  static const sim::Schema<DataOptions> s = [] {
    sim::Schema<DataOptions> s;
    s.text("doc_lengths_file", "",
           "file of document lengths in tokens (whitespace-separated integers, relative to the "
           "scenario file); empty: the built-in log-normal",
           [](auto& d) -> auto& { return d.doc_lengths_file; })
        .real("doc_length_median_tokens", "tokens", 1, 1e9, 600,
              "median of the built-in log-normal document-length distribution [est]",
              [](auto& d) -> auto& { return d.doc_length_median_tokens; })
        .real("doc_length_sigma", "", 0, 10, 1.6,
              "sigma (of ln length) of the built-in log-normal distribution [est]",
              [](auto& d) -> auto& { return d.doc_length_sigma; })
        .integer("seed", "", 0, 9.0e15, 1, "seed of document sampling and shuffling",
                 [](auto& d) -> auto& { return d.seed; });
    return s;
  }();
  return s;
}

void validate(const Job& job, std::int64_t gpus_per_node) {
  const auto& p = job.parallel;
  const auto& m = job.model;
  if (m.experts % p.ep != 0)
    throw sim::ParamError("model.experts",
                          fmt::format("experts ({}) must be divisible by ep ({})", m.experts, p.ep));
  if (gpus_per_node % p.ep != 0)
    throw sim::ParamError("parallel.ep", fmt::format("ep ({}) must divide the GPUs of a node ({}): "
                                                     "expert parallelism stays inside a node",
                                                     p.ep, gpus_per_node));
  if (p.replica_gpus % gpus_per_node != 0)
    throw sim::ParamError("parallel.replica_gpus",
                          fmt::format("{} GPUs cannot be tiled by nodes of {} GPUs",
                                      p.replica_gpus, gpus_per_node));
}

}  // namespace twin::model
