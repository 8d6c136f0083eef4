// NCCL settings a user controls (environment or ncclConfig_t), JOB.md §6.13 and §8.
#pragma once

#include <cstdint>

#include "sim/param.hpp"

namespace twin::hardware {

// NCCL's default CTAs (channels) per collective, as observed on the real job (JOB.md §6.13).
struct DefaultCtas {
  std::int64_t expert_allgather = 40;
  std::int64_t grad_all_to_all = 64;
  std::int64_t expert_reduce_scatter = 40;
  std::int64_t dense = 8;
  std::int64_t nvlink_gather = 24;
  std::int64_t ep_all_to_all = 16;
  std::int64_t replica_all_reduce = 8;
  std::int64_t tp = 24;  // tensor parallelism's all-gathers and reduce-scatters inside a node
};

struct NcclOptions {
  std::int64_t max_ctas = 0;  // NCCL_MAX_CTAS; 0: unset (NCCL's own choice)
  // SMs held on every GPU for the whole step by another communication library or side job
  // (DeepEP reserves 20): compute kernels and NCCL share the others.
  std::int64_t reserved_sms = 0;
  DefaultCtas default_ctas;
};

const sim::Schema<NcclOptions>& nccl_options_schema();

}  // namespace twin::hardware
