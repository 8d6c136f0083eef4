// The real PyTorch profiler traces committed under tests/data/traces/ (their provenance in the
// README there), each with the NCCL setting of scenarios/micro-step.json it was recorded with
// and, for another card's, the profile of that card.
#pragma once

#include <string>
#include <vector>

namespace twin::test {
struct RealTrace {
  const char* file;
  const char* setting;
  const char* profile = "";  // another card's trace: the scenario under that card's profile
  std::vector<std::string> sets() const {
    std::vector<std::string> s{setting};
    if (*profile) s.push_back(std::string("hardware.profile=") + profile);
    return s;
  }
};
inline const RealTrace kRealTraces[] = {
    {"micro-step-max-ctas-16.trace.json.gz", "nccl.max_ctas=16"},
    {"micro-step-max-ctas-8.trace.json.gz", "nccl.max_ctas=8"},
    {"micro-step-max-ctas-64.trace.json.gz", "nccl.max_ctas=64"},
    {"moe-step.trace.json.gz", "nccl.max_ctas=16"},
    {"micro-step-h100-max-ctas-16.trace.json.gz", "nccl.max_ctas=16", "h100-sxm-flex"}};
}  // namespace twin::test
