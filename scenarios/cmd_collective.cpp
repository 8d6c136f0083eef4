// `twin collective`: the twin's time for one NCCL collective over N ranks of the scenario's
// machine (nodes placed as the scenario places them), per message size, in nccl-tests' columns —
// so that a user can lay it beside all_gather_perf, reduce_scatter_perf, all_reduce_perf or
// alltoall_perf run on the real machine (issue #20, item 4). nccl-tests' conventions
// (doc/PERFORMANCE.md there): size is the bytes of the full buffer (all-gather: the gathered
// output; reduce-scatter: the input), algbw = size / time, busbw = algbw · 2(n−1)/n for
// all-reduce and · (n−1)/n for all-gather, reduce-scatter and all-to-all.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "hardware/cluster.hpp"
#include "hardware/collective.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "sim/engine.hpp"
#include "sim/fluid.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

namespace {

double bus_factor(hardware::CollKind k, int n) {
  const double f = static_cast<double>(n - 1) / n;
  return k == hardware::CollKind::all_reduce ? 2 * f : f;
}

// One collective of `bytes` alone on an idle machine of the scenario's hardware: its time.
double collective_s(const Scenario& s, const CollectiveArgs& a, double bytes) {
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  const int gpn = static_cast<int>(s.hw.node.gpus);
  hardware::Cluster c(e, f, s.hw, (a.ranks + gpn - 1) / gpn * gpn, s.nccl);
  c.attach_fabric(s.placement, 1);
  hardware::CollectiveSpec spec;
  spec.kind = collective_kind(a.kind, "--kind");
  spec.bytes = bytes;
  spec.default_ctas = a.ctas;
  std::vector<sim::Task*> tasks;
  for (int r = 0; r < a.ranks; ++r) spec.ranks.push_back(r), tasks.push_back(&g.add("collective"));
  hardware::run_collective(tasks, c, spec);
  g.start();
  e.run();
  double end = 0;
  for (const auto* t : tasks) end = std::max(end, t->end_time().to_s());
  return end;
}

}  // namespace

hardware::CollKind collective_kind(const std::string& k, const std::string& option) {
  if (k == "all_gather") return hardware::CollKind::all_gather;
  if (k == "reduce_scatter") return hardware::CollKind::reduce_scatter;
  if (k == "all_reduce") return hardware::CollKind::all_reduce;
  if (k == "all_to_all") return hardware::CollKind::all_to_all;
  throw InputError(option, "", fmt::format("\"{}\": expected all_gather, reduce_scatter, all_reduce or all_to_all", k));
}

Json collective_json(const CommonArgs& args, const CollectiveArgs& a) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  const auto& s = loaded.scenario;
  const auto kind = collective_kind(a.kind, "--kind");
  if (a.ranks < 2 || a.ranks > 4096) throw InputError("--ranks", "", fmt::format("{}: expected 2 … 4096", a.ranks));
  if (a.ctas < 1 || a.ctas > 64) throw InputError("--ctas", "", fmt::format("{}: expected 1 … 64 (NCCL's channels)", a.ctas));
  if (a.bytes.empty()) throw InputError("--bytes", "", "expected one size or more");
  Json rows = Json::array();
  for (const double b : a.bytes) {
    if (!(b >= 4) || b > 1e13) throw InputError("--bytes", "", fmt::format("{}: expected 4 B … 10 TB", b));
    const double t = collective_s(s, a, b);
    const double algbw = b / t / 1e9;
    rows.push_back({{"size_B", b}, {"count", b / 4}, {"type", "float"}, {"redop", "sum"}, {"time_us", t * 1e6},
                    {"algbw_GBps", algbw}, {"busbw_GBps", algbw * bus_factor(kind, a.ranks)}});
  }
  return {{"kind", a.kind}, {"ranks", a.ranks}, {"ctas", a.ctas}, {"profile", s.hw.name},
          {"max_ctas", s.nccl.max_ctas}, {"rows", rows}, {"provenance", provenance(loaded.resolved)}};
}

int cmd_collective(const CommonArgs& args, const CollectiveArgs& a, std::ostream& out) {
  const Json j = collective_json(args, a);
  if (args.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  fmt::print(out, "# twin: {} over {} ranks, profile {}, NCCL's default {} CTAs (nccl.max_ctas {})\n",
             a.kind, a.ranks, j["profile"].get<std::string>(), a.ctas, j["max_ctas"].get<int>());
  fmt::print(out, "#{:>12} {:>12} {:>8} {:>6} {:>10} {:>8} {:>8}\n", "size", "count", "type", "redop", "time", "algbw", "busbw");
  fmt::print(out, "#{:>12} {:>12} {:>8} {:>6} {:>10} {:>8} {:>8}\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)");
  for (const auto& r : j["rows"])
    fmt::print(out, " {:>12.0f} {:>12.0f} {:>8} {:>6} {:>10.1f} {:>8.2f} {:>8.2f}\n", r["size_B"].get<double>(),
               r["count"].get<double>(), "float", "sum", r["time_us"].get<double>(), r["algbw_GBps"].get<double>(),
               r["busbw_GBps"].get<double>());
  return 0;
}

}  // namespace twin::scenarios
