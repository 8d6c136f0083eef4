#include "hardware/nccl_options.hpp"

namespace twin::hardware {

const sim::Schema<NcclOptions>& nccl_options_schema() {
  static const sim::Schema<NcclOptions> s = [] {
    sim::Schema<NcclOptions> s;
    s.integer(
         "max_ctas", "CTAs", 0, 64,
         "NCCL_MAX_CTAS: cap on CTAs (channels) per collective; 0 leaves NCCL's default",
         [](auto& n) -> auto& { return n.max_ctas; })
        .integer(
            "reserved_sms", "SMs", 0, 120,
            "SMs held on every GPU for the whole step by another library or side job (as "
            "DeepEP reserves 20): kernels and NCCL CTAs share the rest",
            [](auto& n) -> auto& { return n.reserved_sms; })
        .integer(
            "default_ctas.expert_allgather", "CTAs", 1, 64,
            "NCCL's CTAs for the 96-way expert all-gather over InfiniBand [cal: 40]",
            [](auto& n) -> auto& { return n.default_ctas.expert_allgather; })
        .integer(
            "default_ctas.grad_all_to_all", "CTAs", 1, 64,
            "NCCL's CTAs for the bf16 gradient all-to-all [cal: 64]",
            [](auto& n) -> auto& { return n.default_ctas.grad_all_to_all; })
        .integer(
            "default_ctas.expert_reduce_scatter", "CTAs", 1, 64,
            "NCCL's CTAs for the fp32 expert-gradient reduce-scatter [est: as the gather]",
            [](auto& n) -> auto& { return n.default_ctas.expert_reduce_scatter; })
        .integer(
            "default_ctas.dense", "CTAs", 1, 64,
            "NCCL's CTAs for dense (384-way) all-gathers and reduce-scatters [cal: 8]",
            [](auto& n) -> auto& { return n.default_ctas.dense; })
        .integer(
            "default_ctas.nvlink_gather", "CTAs", 1, 64,
            "NCCL's CTAs for the node-local (NVLink) gather of dense weights [cal: 24]",
            [](auto& n) -> auto& { return n.default_ctas.nvlink_gather; })
        .integer(
            "default_ctas.tp", "CTAs", 1, 64,
            "NCCL's CTAs for tensor parallelism's activation all-gathers and reduce-scatters "
            "inside a node [est: as the node-local gather, nvlink_gather]",
            [](auto& n) -> auto& { return n.default_ctas.tp; })
        .integer(
            "default_ctas.ep_all_to_all", "CTAs", 1, 64,
            "CTAs of the expert-parallel token all-to-all over NVLink; under "
            "training.ep_dispatch=per_rank the dispatcher's SMs, not capped by max_ctas [est]",
            [](auto& n) -> auto& { return n.default_ctas.ep_all_to_all; })
        .integer(
            "default_ctas.replica_all_reduce", "CTAs", 1, 64,
            "NCCL's CTAs for the data-parallel replicas' gradient all-reduce (HSDP), one rank per "
            "replica over InfiniBand [est: as the dense collectives]",
            [](auto& n) -> auto& { return n.default_ctas.replica_all_reduce; });
    return s;
  }();
  return s;
}

}  // namespace twin::hardware
