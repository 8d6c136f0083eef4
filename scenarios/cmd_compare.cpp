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
Json sms_json(std::vector<Held> h) {
  std::vector<std::pair<double, int>> edges;
  for (const auto& x : h) edges.emplace_back(x.start_s, x.ctas), edges.emplace_back(x.end_s, -x.ctas);
  std::sort(edges.begin(), edges.end());
  int now = 0, most = 0;
  double busy = 0, weighted = 0, high = 0, last = edges.empty() ? 0 : edges.front().first;
  for (const auto& [t, d] : edges) {
    const double dt = t - last;
    if (now > 0) busy += dt, weighted += dt * now;
    if (now >= 64) high += dt;
    now += d, last = t, most = std::max(most, now);
  }
  return {{"max", most}, {"mean_while_collective", busy > 0 ? weighted / busy : 0.0}, {"seconds_at_or_above_64", high}};
}

struct Side {
  std::map<std::string, std::pair<double, double>> categories;   // name → (launches, seconds)
  std::map<std::string, std::pair<double, double>> collectives;  // kind → (launches, seconds)
  std::map<std::string, std::vector<reports::Interval>> streams;
  std::vector<Held> held;
  double first_s = 1e300, last_s = 0;
  void add(const std::string& cat, const std::string& kind, const std::string& stream, double start_s,
           double dur_s, double launches, int ctas) {
    auto& c = categories[cat];
    c.first += launches, c.second += dur_s;
    if (!kind.empty()) {
      auto& k = collectives[kind];
      k.first += launches, k.second += dur_s;
      held.push_back({start_s, start_s + dur_s, ctas});
    }
    streams[stream].push_back({static_cast<std::int64_t>(start_s * 1e9), static_cast<std::int64_t>((start_s + dur_s) * 1e9)});
    first_s = std::min(first_s, start_s), last_s = std::max(last_s, start_s + dur_s);
  }
};

Side real_side(const KinetoStep& k) {
  Side s;
  for (const auto& a : k.activities)
    s.add(a.category, a.collective, fmt::format("stream {}", a.stream), a.start_us * 1e-6, a.dur_us * 1e-6, 1,
          a.collective.empty() ? 0 : a.ctas);
  return s;
}

// The twin's collective categories by the kind of collective they run.
std::string twin_kind(const std::string& category, const Json& plan) {
  if (category.find("all_gather") != std::string::npos) return "all_gather";
  if (category == "dense_reduce_scatter") return "reduce_scatter";
  if (category.find("all_reduce") != std::string::npos) return "all_reduce";
  if (category == "expert_grad_reduce")
    return plan.value("grad_reduce", "") == "reduce_scatter" ? "reduce_scatter" : "all_to_all";
  return "all_to_all";
}

// The plan's launches one after another inside their task (the plan times tasks, not launches).
Side twin_side(const Json& plan) {
  Side s;
  const double t0 = plan["tasks"].empty() ? 0.0 : plan["tasks"][0].value("start_s", 0.0);
  double first = 1e300;
  for (const auto& t : plan["tasks"]) first = std::min(first, t.value("start_s", t0));
  for (const auto& t : plan["tasks"]) {
    double at = t.value("start_s", first) - first;
    for (const auto& l : t["launches"]) {
      const std::string cat = l.value("category", "other");
      const bool coll = l.value("kind", "") == "collective";
      const double dur = l.value("twin_s", 0.0);
      s.add(coll ? "collective" : cat, coll ? twin_kind(cat, plan) : "", t.value("stream", "?"), at, dur,
            coll ? 1.0 : l.value("repeat", 1.0), l.value("ctas", 0));
      at += dur;
    }
  }
  return s;
}

Json side_json(const Side& s) {
  Json cats = Json::object(), colls = Json::object(), streams = Json::object();
  for (const auto& [k, v] : s.categories) cats[k] = {{"launches", v.first}, {"seconds", v.second}};
  for (const auto& [k, v] : s.collectives) colls[k] = {{"launches", v.first}, {"seconds", v.second}};
  for (auto [k, v] : s.streams) streams[k] = {{"launches", v.size()}, {"busy_s", reports::merge(v)}};
  std::vector<Held> held = s.held;
  return {{"step_s", s.last_s > s.first_s ? s.last_s - s.first_s : 0.0},
          {"categories", cats},
          {"collectives", colls},
          {"streams", streams},
          {"sms_held_by_collectives", sms_json(held)}};
}

}  // namespace

Json compare_json(const CommonArgs& args, const CompareArgs& cmp) {
  const auto real = read_kineto(cmp.kineto, cmp.step);
  const auto loaded = load_scenario(args.scenario, args.load_options());
  RunOptions ro = args.run_options();
  ro.plan_rank = cmp.rank;
  const auto run = simulate(loaded, ro);
  if (run.plan.is_null())
    throw InputError("--rank", "", fmt::format("{}: not a rank of the scenario's simulated GPUs", cmp.rank));
  Json out{{"trace", cmp.kineto}, {"step", real.step}, {"scenario", args.scenario}, {"rank", cmp.rank},
           {"real", side_json(real_side(real))}, {"twin", side_json(twin_side(run.plan))}};
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
    fmt::print(out, "{:28s} {:>8.0f} {:>11.2f} {:>8.0f} {:>11.2f} {:>9}\n", name, a.value("launches", 0.0), ra * 1e3,
               b.value("launches", 0.0), tb * 1e3, ra > 0 && tb > 0 ? fmt::format("{:+.1f}%", 100 * (tb / ra - 1)) : "-");
  };
  fmt::print(out, "{:28s} {:>8} {:>11} {:>8} {:>11} {:>9}\n", "category", "real n", "real ms", "twin n", "twin ms", "error");
  std::map<std::string, bool> names;
  for (const auto& [k, v] : r["categories"].items()) names[k] = true;
  for (const auto& [k, v] : t["categories"].items()) names[k] = true;
  for (const auto& [k, v] : names)
    row(k, r["categories"].value(k, Json::object()), t["categories"].value(k, Json::object()));
  std::map<std::string, bool> kinds;
  for (const auto& [k, v] : r["collectives"].items()) kinds[k] = true;
  for (const auto& [k, v] : t["collectives"].items()) kinds[k] = true;
  for (const auto& [k, v] : kinds)
    row("  collective " + k, r["collectives"].value(k, Json::object()), t["collectives"].value(k, Json::object()));
  fmt::print(out, "step (first start to last end): real {:.2f} ms, twin {:.2f} ms\n", r["step_s"].get<double>() * 1e3,
             t["step_s"].get<double>() * 1e3);
  for (const auto* side : {&r, &t}) {
    fmt::print(out, "{} streams:", side == &r ? "real" : "twin");
    for (const auto& [k, v] : (*side)["streams"].items())
      fmt::print(out, "  {} {:.1f} ms busy ({} launches)", k, v["busy_s"].get<double>() * 1e3, v["launches"].get<std::size_t>());
    const auto& h = (*side)["sms_held_by_collectives"];
    fmt::print(out, "\n  SMs held by collectives: max {}, mean {:.1f} while any runs, {:.3f} s at 64 or more\n",
               h["max"].get<int>(), h["mean_while_collective"].get<double>(), h["seconds_at_or_above_64"].get<double>());
  }
  return 0;
}

}  // namespace twin::scenarios
