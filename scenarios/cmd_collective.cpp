// `twin collective`: the twin's time for one NCCL collective over N ranks of the scenario's
// machine (nodes placed as the scenario places them), per message size, in nccl-tests' columns —
// so that a user can lay it beside all_gather_perf, reduce_scatter_perf, all_reduce_perf or
// alltoall_perf run on the real machine (issue #20, item 4; the columns and their formulas:
// hardware/nccl_tests.hpp). With --nccl-tests LOG... it reads such logs and prints the twin's
// time and busbw for each of their rows beside the measured.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "hardware/cluster.hpp"
#include "hardware/collective.hpp"
#include "hardware/nccl_tests.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "sim/engine.hpp"
#include "sim/fluid.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

namespace {

// One collective of `bytes` over `ranks` alone on an idle machine of the scenario's hardware: its
// time.
double collective_s(const Scenario& s, hardware::CollKind kind, int ranks, int ctas, double bytes) {
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  const int gpn = static_cast<int>(s.hw.node.gpus);
  hardware::Cluster c(e, f, s.hw, (ranks + gpn - 1) / gpn * gpn,
                      static_cast<int>(s.nccl.reserved_sms), hardware::FabricSpec{s.placement, 1});
  hardware::CollectiveSpec spec;
  spec.kind = kind;
  spec.bytes = bytes;
  spec.ctas = hardware::channels(kind, ctas, s.nccl, static_cast<int>(s.hw.gpu.sm_count));
  std::vector<sim::Task*> tasks;
  for (int r = 0; r < ranks; ++r) spec.ranks.push_back(r), tasks.push_back(&g.add("collective"));
  hardware::run_collective(tasks, c, spec);
  g.start();
  e.run();
  double end = 0;
  for (const auto* t : tasks) end = std::max(end, t->end_time().to_s());
  return end;
}

// Real nccl-tests logs, every row beside the twin's prediction of it: the same collective,
// ranks and size, NCCL_MAX_CTAS as the log states it (else the scenario's nccl.max_ctas).
Json against_logs(const Scenario& s, const CollectiveArgs& a) {
  Json rows = Json::array();
  for (const auto& file : a.nccl_tests) {
    std::vector<hardware::NcclTestsRun> runs;
    try {
      runs = hardware::read_nccl_tests(file);
    } catch (const std::invalid_argument& e) {
      throw InputError(file, "", e.what());
    }
    for (const auto& run : runs) {
      Scenario on = s;
      if (run.max_ctas > 0) on.nccl.max_ctas = run.max_ctas;
      for (const auto& r : run.rows) {
        const auto twin = hardware::nccl_tests_row(
            run.kind, run.ranks, r.size_B, collective_s(on, run.kind, run.ranks, a.ctas, r.size_B));
        rows.push_back({{"log", file.substr(file.find_last_of('/') + 1)},
                        {"test", hardware::nccl_tests_program(run.kind)},
                        {"ranks", run.ranks},
                        {"max_ctas", on.nccl.max_ctas},
                        {"size_B", r.size_B},
                        {"measured_time_us", r.time_us},
                        {"twin_time_us", twin.time_us},
                        {"measured_busbw_GBps", r.busbw_GBps},
                        {"twin_busbw_GBps", twin.busbw_GBps}});
      }
    }
  }
  return rows;
}

}  // namespace

hardware::CollKind collective_kind(const std::string& k, const std::string& option) {
  if (const auto kind = hardware::coll_kind_named(k)) return *kind;
  throw InputError(
      option, "",
      fmt::format("\"{}\": expected all_gather, reduce_scatter, all_reduce or all_to_all", k));
}

Json collective_json(const CommonArgs& args, const CollectiveArgs& a) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  const auto& s = loaded.scenario;
  if (a.ctas < 1 || a.ctas > 64)
    throw InputError("--ctas", "", fmt::format("{}: expected 1 … 64 (NCCL's channels)", a.ctas));
  if (!a.nccl_tests.empty())
    return {{"profile", s.hw.name},
            {"ctas", a.ctas},
            {"against_nccl_tests", against_logs(s, a)},
            {"provenance", provenance(loaded.resolved)}};
  const auto kind = collective_kind(a.kind, "--kind");
  if (a.ranks < 2 || a.ranks > 4096)
    throw InputError("--ranks", "", fmt::format("{}: expected 2 … 4096", a.ranks));
  if (a.bytes.empty()) throw InputError("--bytes", "", "expected one size or more");
  Json rows = Json::array();
  for (const double b : a.bytes) {
    if (!(b >= 4) || b > 1e13)
      throw InputError("--bytes", "", fmt::format("{}: expected 4 B … 10 TB", b));
    const auto r =
        hardware::nccl_tests_row(kind, a.ranks, b, collective_s(s, kind, a.ranks, a.ctas, b));
    rows.push_back({{"size_B", r.size_B},
                    {"count", r.count},
                    {"type", r.type},
                    {"redop", r.redop},
                    {"time_us", r.time_us},
                    {"algbw_GBps", r.algbw_GBps},
                    {"busbw_GBps", r.busbw_GBps}});
  }
  return {{"kind", a.kind},
          {"ranks", a.ranks},
          {"ctas", a.ctas},
          {"profile", s.hw.name},
          {"max_ctas", s.nccl.max_ctas},
          {"rows", rows},
          {"provenance", provenance(loaded.resolved)}};
}

int cmd_collective(const CommonArgs& args, const CollectiveArgs& a, std::ostream& out) {
  const Json j = collective_json(args, a);
  if (args.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  if (j.contains("against_nccl_tests")) {
    fmt::print(out,
               "# nccl-tests logs beside the twin (profile {}, NCCL's own {} CTAs capped by "
               "NCCL_MAX_CTAS; "
               "error = twin / measured − 1)\n",
               j["profile"].get<std::string>(), a.ctas);
    fmt::print(out, "{:20s} {:>5} {:>8} {:>12} {:>12} {:>12} {:>9} {:>9} {:>8}\n", "test", "ranks",
               "maxCTAs", "size (B)", "real us", "twin us", "real busbw", "twin busbw", "error");
    for (const auto& r : j["against_nccl_tests"]) {
      const double real = r["measured_busbw_GBps"].get<double>(),
                   twin = r["twin_busbw_GBps"].get<double>();
      fmt::print(out, "{:20s} {:>5} {:>8} {:>12.0f} {:>12.1f} {:>12.1f} {:>9.2f} {:>9.2f} {:>8}\n",
                 r["test"].get<std::string>(), r["ranks"].get<int>(), r["max_ctas"].get<int>(),
                 r["size_B"].get<double>(), r["measured_time_us"].get<double>(),
                 r["twin_time_us"].get<double>(), real, twin,
                 real > 0 ? fmt::format("{:+.1f}%", 100 * (twin / real - 1)) : "-");
    }
    return 0;
  }
  fmt::print(out,
             "# twin: {} over {} ranks, profile {}, NCCL's default {} CTAs (nccl.max_ctas {})\n",
             a.kind, a.ranks, j["profile"].get<std::string>(), a.ctas, j["max_ctas"].get<int>());
  fmt::print(out, "#{:>12} {:>12} {:>8} {:>6} {:>10} {:>8} {:>8}\n", "size", "count", "type",
             "redop", "time", "algbw", "busbw");
  fmt::print(out, "#{:>12} {:>12} {:>8} {:>6} {:>10} {:>8} {:>8}\n", "(B)", "(elements)", "", "",
             "(us)", "(GB/s)", "(GB/s)");
  for (const auto& r : j["rows"])
    fmt::print(out, " {:>12.0f} {:>12.0f} {:>8} {:>6} {:>10.1f} {:>8.2f} {:>8.2f}\n",
               r["size_B"].get<double>(), r["count"].get<double>(), r["type"].get<std::string>(),
               r["redop"].get<std::string>(), r["time_us"].get<double>(),
               r["algbw_GBps"].get<double>(), r["busbw_GBps"].get<double>());
  return 0;
}

}  // namespace twin::scenarios
