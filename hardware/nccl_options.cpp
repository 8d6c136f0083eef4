#include "hardware/nccl_options.hpp"

namespace twin::hardware {

const sim::Schema<NcclOptions>& nccl_options_schema() {
  static const sim::Schema<NcclOptions> s = [] {
    sim::Schema<NcclOptions> s;
    s.integer("max_ctas", "CTAs", 0, 64, 0,
              "NCCL_MAX_CTAS: cap on CTAs (channels) per collective; 0 leaves NCCL's default",
              [](auto& n) -> auto& { return n.max_ctas; });
    return s;
  }();
  return s;
}

}  // namespace twin::hardware
