// `twin compare --kineto TRACE SCENARIO`: a real step (a PyTorch profiler trace) beside the twin's
// prediction of the same rank, category by category, stream by stream, and the SMs that
// collectives held (issue #20). The twin's side is the rank's launch plan (scenarios/plan.hpp):
// every launch with its category, seconds and CTAs, on the twin's streams.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <map>
#include <ostream>

#include "reports/metrics.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/kineto.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

namespace {

// Collectives' CTAs as intervals (s) → the SMs held over time (issue #20: "the SMs held by
// NCCL over time from the NCCL kernels' grids"): the most at once, the mean while any collective
// runs, and the seconds at 64 or more.
struct Held {
  double start_s, end_s;
  int ctas;
};
Json sms_json(const std::vector<Held>& h) {
  std::vector<std::pair<double, int>> edges;
  for (const auto& x : h)
    edges.emplace_back(x.start_s, x.ctas), edges.emplace_back(x.end_s, -x.ctas);
  std::sort(edges.begin(), edges.end());
  int now = 0, most = 0;
  double busy = 0, weighted = 0, high = 0, last = edges.empty() ? 0 : edges.front().first;
  for (const auto& [t, d] : edges) {
    const double dt = t - last;
    if (now > 0) busy += dt, weighted += dt * now;
    if (now >= 64) high += dt;
    now += d, last = t, most = std::max(most, now);
  }
  return {{"max", most},
          {"mean_while_collective", busy > 0 ? weighted / busy : 0.0},
          {"seconds_at_or_above_64", high}};
}

// Launches of each collective kind that ran (in part) beside another of the same kind, on any
// stream. Under FSDP2's shared streams (training.fsdp_streams = fsdp2) no two all-gathers run at
// once before unshard_async_op, nor two reduce-scatters ever; per process group, they may.
std::map<std::string, int> beside_same_kind(const std::vector<Span>& spans) {
  constexpr double kTouch_s = 1e-9;  // one ending as the next starts is not beside it (rounding)
  std::map<std::string, std::vector<std::pair<double, double>>> by_kind;
  for (const auto& x : spans)
    if (!x.collective.empty()) by_kind[x.collective].emplace_back(x.start_s, x.start_s + x.dur_s);
  std::map<std::string, int> out;
  for (auto& [kind, iv] : by_kind) {
    std::sort(iv.begin(), iv.end());
    std::vector<bool> beside(iv.size(), false);
    for (std::size_t i = 0; i < iv.size(); ++i)
      for (std::size_t j = i + 1; j < iv.size() && iv[j].first < iv[i].second - kTouch_s; ++j)
        beside[i] = beside[j] = true;
    out[kind] = static_cast<int>(std::count(beside.begin(), beside.end(), true));
  }
  return out;
}

struct Side {
  std::map<std::string, std::pair<double, double>> categories;   // name → (launches, seconds)
  std::map<std::string, std::pair<double, double>> collectives;  // kind → (launches, seconds)
  std::map<std::string, int> beside;                             // kind → beside_same_kind
  std::map<std::string, std::vector<reports::Interval>> streams;
  std::vector<Held> held;
  double first_s = 1e300, last_s = 0;
  explicit Side(const std::vector<Span>& spans) {
    for (const auto& x : spans) {
      auto& c = categories[x.category];
      c.first += x.launches, c.second += x.dur_s;
      if (!x.collective.empty()) {
        auto& k = collectives[x.collective];
        k.first += x.launches, k.second += x.dur_s;
        held.push_back({x.start_s, x.start_s + x.dur_s, x.ctas});
      }
      streams[x.stream].push_back({static_cast<std::int64_t>(x.start_s * 1e9),
                                   static_cast<std::int64_t>((x.start_s + x.dur_s) * 1e9)});
      first_s = std::min(first_s, x.start_s), last_s = std::max(last_s, x.start_s + x.dur_s);
    }
    beside = beside_same_kind(spans);
  }
};

Json side_json(const Side& s) {
  Json cats = Json::object(), colls = Json::object(), streams = Json::object();
  for (const auto& [k, v] : s.categories) cats[k] = {{"launches", v.first}, {"seconds", v.second}};
  for (const auto& [k, v] : s.collectives)
    colls[k] = {{"launches", v.first},
                {"seconds", v.second},
                {"beside_same_kind", s.beside.count(k) ? s.beside.at(k) : 0}};
  for (auto [k, v] : s.streams)
    streams[k] = {{"launches", v.size()}, {"busy_s", reports::merge(v)}};
  return {{"step_s", s.last_s > s.first_s ? s.last_s - s.first_s : 0.0},
          {"categories", cats},
          {"collectives", colls},
          {"streams", streams},
          {"sms_held_by_collectives", sms_json(s.held)}};
}

}  // namespace

Json compare_json(const CommonArgs& args, const CompareArgs& cmp) {
  const auto real = read_kineto(cmp.kineto, cmp.step);
  const auto loaded = load_scenario(args.scenario, args.load_options());
  RunOptions ro = args.run_options();
  ro.plan_rank = cmp.rank;
  const auto run = simulate(loaded, ro);
  if (run.plan.is_null())
    throw InputError("--rank", "",
                     fmt::format("{}: not a rank of the scenario's simulated GPUs", cmp.rank));
  Json out{{"trace", cmp.kineto},
           {"step", real.step},
           {"scenario", args.scenario},
           {"rank", cmp.rank},
           {"real", side_json(Side(spans_of(real)))},
           {"twin", side_json(Side(spans_of_plan(run.plan)))}};
  out["provenance"] = provenance(loaded.resolved);
  return out;
}

int cmd_compare(const CommonArgs& args, const CompareArgs& cmp, std::ostream& out) {
  const Json j = compare_json(args, cmp);
  if (args.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  const auto& r = j["real"];
  const auto& t = j["twin"];
  fmt::print(out, "{} {} against {} rank {} (ms; twin / real − 1)\n", j["trace"].get<std::string>(),
             j["step"].get<std::string>(), j["scenario"].get<std::string>(), j["rank"].get<int>());
  auto row = [&](const std::string& name, const Json& a, const Json& b) {
    const double ra = a.value("seconds", 0.0), tb = b.value("seconds", 0.0);
    fmt::print(out, "{:28s} {:>8.0f} {:>11.2f} {:>8.0f} {:>11.2f} {:>9}\n", name,
               a.value("launches", 0.0), ra * 1e3, b.value("launches", 0.0), tb * 1e3,
               ra > 0 && tb > 0 ? fmt::format("{:+.1f}%", 100 * (tb / ra - 1)) : "-");
  };
  fmt::print(out, "{:28s} {:>8} {:>11} {:>8} {:>11} {:>9}\n", "category", "real n", "real ms",
             "twin n", "twin ms", "error");
  std::map<std::string, bool> names;
  for (const auto& [k, v] : r["categories"].items()) names[k] = true;
  for (const auto& [k, v] : t["categories"].items()) names[k] = true;
  for (const auto& [k, v] : names)
    row(k, r["categories"].value(k, Json::object()), t["categories"].value(k, Json::object()));
  std::map<std::string, bool> kinds;
  for (const auto& [k, v] : r["collectives"].items()) kinds[k] = true;
  for (const auto& [k, v] : t["collectives"].items()) kinds[k] = true;
  for (const auto& [k, v] : kinds)
    row("  collective " + k, r["collectives"].value(k, Json::object()),
        t["collectives"].value(k, Json::object()));
  for (const auto* side : {&r, &t}) {
    fmt::print(out, "{} collectives beside another of their kind:", side == &r ? "real" : "twin");
    for (const auto& [k, v] : (*side)["collectives"].items())
      fmt::print(out, " {} {} of {};", k, v["beside_same_kind"].get<int>(),
                 v["launches"].get<double>());
    fmt::print(out, "\n");
  }
  fmt::print(out, "step (first start to last end): real {:.2f} ms, twin {:.2f} ms\n",
             r["step_s"].get<double>() * 1e3, t["step_s"].get<double>() * 1e3);
  for (const auto* side : {&r, &t}) {
    fmt::print(out, "{} streams:", side == &r ? "real" : "twin");
    for (const auto& [k, v] : (*side)["streams"].items())
      fmt::print(out, "  {} {:.1f} ms busy ({} launches)", k, v["busy_s"].get<double>() * 1e3,
                 v["launches"].get<std::size_t>());
    const auto& h = (*side)["sms_held_by_collectives"];
    fmt::print(
        out,
        "\n  SMs held by collectives: max {}, mean {:.1f} while any runs, {:.3f} s at 64 or more\n",
        h["max"].get<int>(), h["mean_while_collective"].get<double>(),
        h["seconds_at_or_above_64"].get<double>());
  }
  return 0;
}

}  // namespace twin::scenarios
