// NCCL settings a user controls (environment or ncclConfig_t), SPEC.md §6.13 and §8.
#pragma once

#include <cstdint>

#include "sim/param.hpp"

namespace twin::hardware {

struct NcclOptions {
  std::int64_t max_ctas = 0;  // NCCL_MAX_CTAS; 0: unset (NCCL's own choice)
};

const sim::Schema<NcclOptions>& nccl_options_schema();

}  // namespace twin::hardware
