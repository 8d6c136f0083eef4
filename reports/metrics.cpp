#include "reports/metrics.hpp"

#include <algorithm>

namespace twin::reports {

double merge(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
    return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns < b.end_ns;
  });
  std::size_t n = 0;  // merged in place: the first n are the result so far
  for (std::size_t k = 0; k < v.size(); ++k) {
    const Interval i = v[k];
    if (i.end_ns <= i.begin_ns) continue;
    if (n > 0 && i.begin_ns <= v[n - 1].end_ns)
      v[n - 1].end_ns = std::max(v[n - 1].end_ns, i.end_ns);
    else
      v[n++] = i;
  }
  v.resize(n);
  std::int64_t total = 0;
  for (const auto& i : v) total += i.end_ns - i.begin_ns;
  return static_cast<double>(total) * 1e-9;
}

double intersection_s(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const auto lo = std::max(a[i].begin_ns, b[j].begin_ns);
    const auto hi = std::min(a[i].end_ns, b[j].end_ns);
    if (hi > lo) total += hi - lo;
    (a[i].end_ns < b[j].end_ns) ? ++i : ++j;
  }
  return static_cast<double>(total) * 1e-9;
}

Breakdown breakdown(std::vector<Interval> compute, std::vector<Interval> comm, double step_s) {
  const double c = merge(compute), n = merge(comm);
  return breakdown_merged(compute, c, comm, n, step_s);
}

Breakdown breakdown_merged(const std::vector<Interval>& compute, double c,
                           const std::vector<Interval>& comm, double n, double step_s) {
  const double both = intersection_s(compute, comm);
  Breakdown b;
  b.compute_overlapped = both;
  b.compute_only = c - both;
  b.comm_wait = n - both;
  b.idle = step_s - (c + n - both);
  return b;
}

NodeSpread node_spread(const std::vector<double>& compute_s, const std::vector<double>& comm_wait_s,
                       int gpus_per_node) {
  const std::size_t g = static_cast<std::size_t>(std::max(1, gpus_per_node));
  const std::size_t nodes = compute_s.size() / g;
  if (nodes == 0) return {};
  auto per_node = [&](const std::vector<double>& v) {
    std::vector<double> m(nodes, 0.0);
    for (std::size_t r = 0; r < nodes * g; ++r) m[r / g] += v[r] / static_cast<double>(g);
    return m;
  };
  const auto c = per_node(compute_s), w = per_node(comm_wait_s);
  const auto [cl, ch] = std::minmax_element(c.begin(), c.end());
  const auto [wl, wh] = std::minmax_element(w.begin(), w.end());
  double mean = 0;
  for (double x : c) mean += x / static_cast<double>(nodes);
  return {mean > 0 ? (*ch - *cl) / mean : 0.0, *wl > 0 ? *wh / *wl : 0.0};
}

void SmTimeline::change(sim::Time t, int held) {
  if (!points_.empty() && points_.back().first == t.count_ns())
    points_.back().second = held;
  else
    points_.emplace_back(t.count_ns(), held);
}

SmTimeline::Stats SmTimeline::stats(sim::Time end) const {
  Stats s;
  double integral = 0, busy = 0;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const auto t0 = points_[i].first;
    const auto t1 = i + 1 < points_.size() ? points_[i + 1].first : end.count_ns();
    const double dt = static_cast<double>(std::max<std::int64_t>(0, t1 - t0)) * 1e-9;
    const int held = points_[i].second;
    s.max = std::max(s.max, held);
    if (held > 0) busy += dt, integral += held * dt;
    if (held >= 64) s.seconds_at_or_above_64 += dt;
  }
  s.mean_while_collective = busy > 0 ? integral / busy : 0;
  return s;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double h = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(h);
  return lo + 1 < v.size() ? v[lo] + (h - static_cast<double>(lo)) * (v[lo + 1] - v[lo]) : v[lo];
}

}  // namespace twin::reports
