#include "scenarios/scenario.hpp"

#include <fmt/format.h>

#include "hardware/topology.hpp"

namespace twin::scenarios {

const sim::Schema<Scenario>& scenario_schema() {
  static const sim::Schema<Scenario> s = [] {
    sim::Schema<Scenario> s;
    s.text(
         "name", std::nullopt, "scenario name", [](auto& x) -> auto& { return x.name; })
        .text(
            "description", std::string(), "what this scenario is",
            [](auto& x) -> auto& { return x.description; })
        .text(
            "model.preset", std::string(),
            "model file to start from: scenarios/models/<name>.json (or a path); keys given "
            "beside it override the file's",
            [](auto& x) -> auto& { return x.model_preset; })
        .include(
            "model", model::model_schema(), [](auto& x) -> auto& { return x.job.model; })
        .text(
            "hardware.profile", std::string(),
            "hardware profile to start from: hardware/profiles/<name>.json (or a path)",
            [](auto& x) -> auto& { return x.hardware_profile; })
        .include(
            "hardware", hardware::profile_schema(), [](auto& x) -> auto& { return x.hw; })
        .include(
            "parallel", model::parallel_schema(), [](auto& x) -> auto& { return x.job.parallel; })
        .include(
            "training", model::training_schema(), [](auto& x) -> auto& { return x.job.training; })
        .include(
            "data", model::data_schema(), [](auto& x) -> auto& { return x.job.data; })
        .include(
            "nccl", hardware::nccl_options_schema(), [](auto& x) -> auto& { return x.nccl; })
        .include(
            "placement", hardware::placement_schema(), [](auto& x) -> auto& { return x.placement; })
        .include(
            "shared", hardware::shared_machine_schema(),
            [](auto& x) -> auto& { return x.placement.shared; });
    return s;
  }();
  return s;
}

void check_cross_fields(const Scenario& s) {
  try {
    model::validate(s.job.model);
  } catch (const sim::ParamError& e) {
    throw sim::ParamError("model." + e.key, e.what());
  }
  model::validate(s.job, s.hw.node.gpus);
  if (const auto p = s.hw.contention.cluster_table_problem(); !p.empty())
    throw sim::ParamError("hardware.contention.clusters.held_sms", p);
  if (const auto p = s.hw.contention.lone_cta.tile_table_problem(); !p.empty())
    throw sim::ParamError("hardware.contention.lone_cta_tiles.tile_m", p);
  if (const auto [key, why] = s.hw.power.problem(); !key.empty())
    throw sim::ParamError("hardware." + key, why);
  // A block-sparse attention kernel is priced in both passes by its fractions
  // (hardware/kernel_cost.cpp): one of them 0 would make the other pass take forever.
  if (const auto& e = s.hw.efficiency;
      (e.attention_fwd_block_fraction > 0) != (e.attention_bwd_block_fraction > 0))
    throw sim::ParamError("hardware.efficiency.attention_bwd_block_fraction",
                          "hardware.efficiency.attention_fwd_block_fraction",
                          "a block-sparse attention kernel needs both block fractions, "
                          "forward and backward, above 0 (or both 0: FlashAttention)");
  // cuBLAS's small GEMMs run clusters of 8 (hardware/kernel_shapes.hpp): SMs reserved for the
  // whole step must leave one, or they never run.
  if (const int r = static_cast<int>(s.nccl.reserved_sms);
      r > 0 && s.hw.contention.usable_sms(hardware::Family::gemm, r, 8) <= 0)
    throw sim::ParamError(
        "nccl.reserved_sms",
        fmt::format("{} SMs reserved leave no cluster of 8 free SMs (hardware.contention."
                    "clusters.c8_usable_sms), which cuBLAS's small GEMMs need",
                    r));
  const auto& n = s.hw.network;
  if (const auto groups = (n.nodes_total + n.nodes_per_group - 1) / n.nodes_per_group;
      groups > hardware::Dragonfly::kMaxGroups)
    throw sim::ParamError(
        "hardware.network.nodes_per_group", "hardware.network.nodes_total",
        fmt::format("{} nodes in groups of {} make {} groups; the fabric model takes at most "
                    "{} (hardware/topology.hpp)",
                    n.nodes_total, n.nodes_per_group, groups, hardware::Dragonfly::kMaxGroups));
  const auto nodes = s.job.parallel.total_gpus() / s.hw.node.gpus;
  if (nodes > s.hw.network.nodes_total)
    throw sim::ParamError(
        "parallel.dp",
        std::vector<std::string>{"parallel.replica_gpus", "hardware.network.nodes_total"},
        fmt::format("the job needs {} nodes; the machine has {}", nodes, s.hw.network.nodes_total));
}

}  // namespace twin::scenarios
