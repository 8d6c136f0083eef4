// Plots of the contention fit: per family, every measured case's slowdown against SMs held
// (filled: fitted points, hollow: held out) and the model's curve for it. Plain SVG, written by
// the project's own code so that the pictures follow the data (twin-fit-contention --svg).
#pragma once

#include <string>
#include <vector>

#include "calibrate/contention_fit.hpp"

namespace twin::calibrate {

// One SVG document for the cases of `group`.
std::string contention_svg(const std::string& group,
                           const std::vector<const ContentionCase*>& cases,
                           const hardware::ContentionModel& m);

}  // namespace twin::calibrate
