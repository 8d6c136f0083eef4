#include "calibrate/contention_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace twin::calibrate {

namespace {

constexpr double kW = 860, kH = 420, kLeft = 60, kRight = 390, kTop = 40, kBottom = 50;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

struct Axes {
  double y_min, y_max;  // slowdowns at the bottom (≤ 1: a kernel can run faster beside held
                        // SMs, its clock higher) and at the top, on a log scale
  double x(double held) const { return kLeft + held / 132.0 * (kW - kLeft - kRight); }
  double y(double s) const {
    const double f = std::log(std::clamp(s, y_min, y_max) / y_min) / std::log(y_max / y_min);
    return kH - kBottom - f * (kH - kTop - kBottom);
  }
};

std::string axes_svg(const Axes& a, const std::string& group) {
  std::string s = fmt::format(
      "<text x='{}' y='22' font-size='16'>{}: slowdown with k SMs held, measured (dots) and model "
      "(lines)</text>\n",
      kLeft, group);
  for (int k = 0; k <= 132; k += 22)
    s += fmt::format(
        "<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='#ddd'/><text x='{0}' y='{3}' "
        "font-size='11' text-anchor='middle'>{4}</text>\n",
        a.x(k), kTop, kH - kBottom, kH - kBottom + 16, k);
  for (double v : {0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0})
    if (v >= a.y_min && v <= a.y_max)
      s += fmt::format(
          "<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='#ddd'/><text x='{3}' y='{4}' "
          "font-size='11' text-anchor='end'>×{5}</text>\n",
          kLeft, a.y(v), kW - kRight, kLeft - 6, a.y(v) + 4, v);
  s += fmt::format(
      "<text x='{}' y='{}' font-size='12' text-anchor='middle'>SMs held (of 132)</text>\n",
      (kLeft + kW - kRight) / 2, kH - 12);
  return s;
}

}  // namespace

std::string contention_svg(const std::string& group,
                           const std::vector<const ContentionCase*>& cases,
                           const hardware::ContentionModel& m) {
  double top = 2, bottom = 1;
  for (const auto* c : cases)
    for (const auto& p : c->points)
      top = std::max(top, p.measured), bottom = std::min(bottom, p.measured);
  const Axes a{std::max(0.5, bottom * 0.95), std::min(40.0, top * 1.1)};
  // Taller than the axes where the legend (one line per case) needs it.
  const double height = std::max(kH, kTop + 14.0 * static_cast<double>(cases.size()));
  std::string s = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' "
      "font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n",
      kW, height);
  s += axes_svg(a, group);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = *cases[i];
    const char* col = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string line;
    for (int k = 0; k <= 124; k += 2)
      line += fmt::format("{:.1f},{:.1f} ", a.x(k), a.y(c.slowdown(m, k)));
    s += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='1.5'/>\n", line,
                     col);
    for (const auto& p : c.points)
      s += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' stroke='{}' fill='{}'/>\n",
                       a.x(p.held), a.y(p.measured), col, p.fitted ? col : "white");
    s += fmt::format("<text x='{}' y='{}' font-size='10' fill='{}'>{}</text>\n", kW - kRight + 10,
                     kTop + 14 * static_cast<double>(i), col, c.name.substr(0, 64));
  }
  return s + "</svg>\n";
}

}  // namespace twin::calibrate
