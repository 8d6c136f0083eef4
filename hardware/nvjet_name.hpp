// nvjet's launch read from its kernel's name, as the PyTorch profiler and Nsight Systems record
// it: nvjet_sm90_tst_<tile_m>x<tile_n>_<k tile>x<stages>_<cluster_m>x<cluster_n>_…, with
// "splitK" where k is split in slices (cuBLASLt's reduction after them: contention.hpp, split_k).
// Used to read the calibration files' launches and by `twin kernel --nvjet`, so that a launch
// seen in a trace is priced as the one cuBLAS made rather than the one the twin would choose.
#pragma once

#include <string_view>

#include "hardware/kernel_shapes.hpp"

namespace twin::hardware {

// The launch `name` ran for (m×k)·(k×n) (d), `batch` of them, with `grid` CTAs (0: not known —
// one CTA per tile padded to whole clusters where the tiles fit `sms`, else one per SM). Its
// tiles from the output (tile_m over n, tile_n over m); a split-K kernel's slices from its grid,
// which it then needs. Throws std::invalid_argument saying what is wrong.
GemmLaunch nvjet_named_launch(std::string_view name, const GemmDims& d, double batch, double grid,
                              int sms);

}  // namespace twin::hardware
