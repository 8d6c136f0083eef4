// Launch plans (`twin run --plan`, scenarios/plan.hpp): one rank's forward and backward as
// real hardware would run it, and every rank's, whose process groups a multi-GPU executor builds
// its NCCL communicators from.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "scenarios/simulate.hpp"
#include "tests/golden_small.hpp"

using namespace twin::scenarios;
using twin::test::small;

TEST_SUITE("scenarios.plan") {
  TEST_CASE("launch plan: one rank's forward and backward, executable in order") {
    RunOptions o;
    o.plan_rank = 3;
    const auto r = simulate(small(), o);
    const auto& plan = r.plan;
    REQUIRE(plan.is_object());
    CHECK(plan["rank"] == 3);
    const auto& tasks = plan["tasks"];
    REQUIRE(tasks.size() > 50);
    std::map<std::string, int> kinds;
    double end = 0;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const auto& t = tasks[i];
      CHECK(t["id"] == i);
      for (const auto& p : t["after"]) CHECK(p.get<std::size_t>() < i);  // a topological order
      CHECK(t["stream"] != "cpu");
      const double dur = t["end_s"].get<double>() - t["start_s"].get<double>();
      for (const auto& l : t["launches"]) {
        ++kinds[l["kind"]];
        if (l["kind"] == "collective") {
          CHECK(l["ctas"].get<int>() >= 1);
          CHECK(l["seconds"].get<double>() == doctest::Approx(dur));
        }
      }
      if (t["category"] != "marker") CHECK(!t["launches"].empty());
      end = std::max(end, t["end_s"].get<double>());
    }
    // Rank 3's last gradient reaches the host at step_end_s, after which only the optimizer runs.
    CHECK(end == doctest::Approx(plan["step_end_s"].get<double>()));
    for (const char* k :
         {"gemm", "grouped_gemm", "attention", "elementwise", "collective", "copy_d2h"})
      CHECK(kinds[k] > 0);
    // The documents are the rank's rows: they cover its tokens.
    double tokens = 0;
    for (const auto& d : plan["documents"]) tokens += d.get<double>();
    CHECK(tokens == plan["tokens"].get<double>());
  }

  TEST_CASE(
      "launch plans of every rank: each group's collectives in the same order on each member") {
    // What a multi-GPU executor needs (one NCCL communicator per process group, collectives
    // issued in one order on every member): per (communicator, group), every member's plan lists
    // the same collectives — kind, bytes, CTAs — in the same order, and names the same members.
    RunOptions o;
    o.plan_all_ranks = true;
    const auto r = simulate(small(), o);
    const int gpus = simulated_gpus(small().scenario);
    REQUIRE(r.plans.size() == static_cast<std::size_t>(gpus));
    using Seq = std::vector<std::string>;
    std::vector<std::map<std::string, Seq>> seq(r.plans.size());
    std::map<std::string, std::vector<int>> members;
    for (std::size_t rank = 0; rank < r.plans.size(); ++rank) {
      CHECK(r.plans[rank]["rank"] == rank);
      for (const auto& t : r.plans[rank]["tasks"])
        for (const auto& l : t["launches"]) {
          if (l["kind"] != "collective") continue;
          const auto group =
              fmt::format("{}:{}", l["comm"].get<std::string>(), l["group"].get<int>());
          const auto ranks = l["group_ranks"].get<std::vector<int>>();
          CHECK(std::count(ranks.begin(), ranks.end(), static_cast<int>(rank)) == 1);
          if (!members.count(group)) members[group] = ranks;
          CHECK(members[group] == ranks);
          CHECK(l["bytes"].get<double>() > 0);
          seq[rank][group].push_back(fmt::format("{} {} {}", l["collective"].get<std::string>(),
                                                 l["bytes"].get<double>(), l["ctas"].get<int>()));
        }
    }
    REQUIRE(members.size() >= 3);  // dense, expert and EP groups at least
    for (const auto& [group, ranks] : members) {
      CAPTURE(group);
      for (const int m : ranks)
        CHECK(seq[static_cast<std::size_t>(m)][group] == seq[ranks[0]][group]);
    }
    // Rank 3's plan is the single-rank plan of rank 3.
    RunOptions one;
    one.plan_rank = 3;
    CHECK(simulate(small(), one).plan == r.plans[3]);
  }
}
