// Least squares y = a + b·x over a set of points: the one straight-line fit of calibrate/ (a
// lone CTA's time over k, the split-K reduction's over bytes) and of the tests that check a
// measured file's shape. Means accumulate Σ x/n, as these fits always have (their outputs are
// checked byte for byte). With one distinct x there is no line: sxx = 0, and a, b stay 0.
#pragma once

#include <iterator>

namespace twin::calibrate {

struct LineFit {
  double a = 0, b = 0;            // intercept, slope
  double mean_x = 0, mean_y = 0;  // of the points
  double sxx = 0, sxy = 0;        // Σ(x − x̄)², Σ(x − x̄)(y − ȳ)
};

// x(p) and y(p) read a point's coordinates.
template <class Points, class X, class Y>
LineFit fit_line(const Points& points, X x, Y y) {
  LineFit f;
  const auto n = static_cast<double>(std::size(points));
  for (const auto& p : points) f.mean_x += x(p) / n, f.mean_y += y(p) / n;
  for (const auto& p : points) {
    const double dx = x(p) - f.mean_x;
    f.sxy += dx * (y(p) - f.mean_y), f.sxx += dx * dx;
  }
  if (f.sxx > 0) f.b = f.sxy / f.sxx, f.a = f.mean_y - f.b * f.mean_x;
  return f;
}

}  // namespace twin::calibrate
