// The real PyTorch profiler traces committed under tests/data/traces/ (their provenance in the
// README there), each with the NCCL setting of scenarios/micro-step.json it was recorded with.
#pragma once

#include <utility>

namespace twin::test {
inline constexpr std::pair<const char*, const char*> kRealTraces[] = {
    {"micro-step-max-ctas-16.trace.json.gz", "nccl.max_ctas=16"},
    {"micro-step-max-ctas-8.trace.json.gz", "nccl.max_ctas=8"},
    {"micro-step-max-ctas-64.trace.json.gz", "nccl.max_ctas=64"},
    {"moe-step.trace.json.gz", "nccl.max_ctas=16"}};
}  // namespace twin::test
