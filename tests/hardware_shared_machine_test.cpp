// The shared machine (hardware/shared_machine.hpp, issue #16): each draw against a closed form.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "hardware/cluster.hpp"
#include "hardware/placement.hpp"
#include "hardware/shared_machine.hpp"
#include "sim/engine.hpp"
#include "sim/fluid.hpp"

using namespace twin;
using namespace twin::hardware;

namespace {
// The fabric resources traffic from node a to node b crosses, with their weights.
std::map<sim::Fluid::ResourceId, double> uses_of(Dragonfly& d, int a, int b) {
  Dragonfly::RouteSum sum;
  d.route(a, b, 1.0, sum);
  std::map<sim::Fluid::ResourceId, double> uses;
  sum.drain(uses);
  return uses;
}
}  // namespace

TEST_SUITE("hardware.shared_machine") {
  TEST_CASE("other jobs' share of a link: uniform on [0, 2·mean], at most 0.95") {
    // Mean m for 2m ≤ 0.95; above, E[min(0.95, U·2m)] = 0.95 − 0.95²/(4m).
    for (const double mean : {0.05, 0.2, 0.6}) {
      CAPTURE(mean);
      double sum = 0, most = 0;
      const int n = 40000;
      for (int k = 0; k < n; ++k) {
        const double u = background_share(mean, 7, static_cast<std::uint64_t>(k));
        sum += u, most = std::max(most, u);
      }
      CHECK(
          sum / n ==
          doctest::Approx(2 * mean <= 0.95 ? mean : 0.95 - 0.95 * 0.95 / (4 * mean)).epsilon(0.02));
      CHECK(most <= std::min(0.95, 2 * mean));
    }
    CHECK(background_share(0, 7, 1) == 0);
    CHECK(background_share(0.3, 7, 1) ==
          background_share(0.3, 7, 1));  // a draw is a function of its seed
  }

  TEST_CASE(
      "a global link shared with other jobs' traffic carries a flow at the capacity they leave") {
    // Two groups, minimal routing: one flow of B bytes from group 0 to group 1 crosses the pair
    // bundle and both aggregates; with background load it runs at C·(1 − max share) of them.
    NetworkSpec net{
        2 * 16, 16, 16, 16,
        100,    2,  50};  // nodes, per group, per leaf, spines, leaf GBps, links/pair, GBps
    SharedMachine m;
    m.background_global_load = 0.3;
    sim::Engine e;
    sim::Fluid f(e);
    Dragonfly d(f, net, 100, Routing::minimal, 0, m, 11);
    const auto uses = uses_of(d, 0, 16);
    REQUIRE(uses.size() == 3);  // egress(0), ingress(1), pair 0→1 (leaves non-blocking)
    double least = INFINITY;
    for (const auto& [r, w] : uses) least = std::min(least, f.capacity(r));
    CHECK(least < 2 * 50e9);  // less than the idle bundle
    CHECK(least >= 2 * 50e9 * 0.05);
    double end = 0;
    std::vector<sim::Fluid::Use> u;
    for (const auto& [r, w] : uses) u.push_back({r, w});
    f.start(1e9, u, sim::Fluid::kUnbounded, [&] { end = e.now().to_s(); });
    e.run();
    CHECK(end == doctest::Approx(1e9 / least).epsilon(1e-6));
  }

  TEST_CASE("a machine of more groups than the fabric model takes is refused, not built") {
    sim::Engine e;
    sim::Fluid f(e);
    // 513 groups of one node: the hop tables would grow as groups² and their search as groups³.
    NetworkSpec net{Dragonfly::kMaxGroups + 1, 1, 1, 16, 100, 2, 50};
    CHECK_THROWS_AS(Dragonfly(f, net, 100, Routing::minimal, 0), std::invalid_argument);
    net.nodes_total = Dragonfly::kMaxGroups;
    Dragonfly d(f, net, 100, Routing::minimal, 0);
    CHECK(d.groups() == Dragonfly::kMaxGroups);
    CHECK(uses_of(d, 0, Dragonfly::kMaxGroups - 1).size() == 3);  // egress, ingress, pair
  }

  TEST_CASE("a job on its own service level keeps max(1 − share, own_sl_share) of each link") {
    // Weighted VL arbitration: beside other jobs' lane the job's lane gets at least its weight's
    // share of the link, so only the shares above 1 − own_sl_share are recovered.
    NetworkSpec net{2 * 16, 16, 16, 16, 100, 2, 50};
    auto capacities = [&](double own) {
      SharedMachine m;
      m.background_global_load = 0.45;  // shares up to 0.9
      m.own_sl_share = own;
      sim::Engine e;
      sim::Fluid f(e);
      Dragonfly d(f, net, 100, Routing::minimal, 0, m, 11);
      std::vector<double> c;
      for (const auto& [r, w] : uses_of(d, 0, 16)) c.push_back(f.capacity(r));
      return c;
    };
    const auto shared = capacities(0), own = capacities(0.5);
    const double idle = 2 * 50e9;  // egress, ingress and the pair bundle alike
    REQUIRE(shared.size() == 3);
    REQUIRE(own.size() == 3);
    int recovered = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(own[i] == doctest::Approx(std::max(shared[i], 0.5 * idle)));
      recovered += own[i] > shared[i] ? 1 : 0;
    }
    CHECK(recovered >= 1);  // (seed 11 draws a share above 0.5 on at least one of them)
  }

  TEST_CASE(
      "adaptive routing moves traffic off a loaded global link: minimal share (1 − a)(1 − u)") {
    NetworkSpec net{3 * 16, 16, 16, 16, 100, 2, 50};  // three groups: a third for detours
    SharedMachine m;
    m.background_global_load = 0.3;
    sim::Engine e;
    sim::Fluid f(e);
    const double a = 0.5;
    Dragonfly d(f, net, 100, Routing::adaptive, a, m, 11);
    int pairs = 0;
    for (const auto& [r, w] : uses_of(d, 0, 16)) {
      if (d.name(r) != "global.group0->group1") {
        CHECK(w == 1.0);  // both groups' aggregates carry all of it
        continue;
      }
      ++pairs;
      const double u = 1 - f.capacity(r) / (2 * 50e9);  // the others' share of the pair bundle
      CHECK(u > 0);
      CHECK(w == doctest::Approx((1 - a) * (1 - u)));
    }
    CHECK(pairs == 1);
    // An idle machine keeps the profile's fixed split.
    Dragonfly idle(f, net, 100, Routing::adaptive, a, SharedMachine{}, 11);
    CHECK(idle.nonminimal_share(0, 1) == a);
  }

  TEST_CASE("bursts shorter than a flow: it moves Σ capacity_j · burst, each burst its own draw") {
    // One flow over the three loaded bundles of a group pair, redrawn every 10 ms; its end is
    // where the cumulative Σ_j min_r C_j(r)·dt reaches its bytes (capacities read from a twin
    // fabric redrawn burst by burst).
    NetworkSpec net{2 * 16, 16, 16, 16, 100, 2, 50};
    SharedMachine m;
    m.background_global_load = 0.3;
    m.burst_s = 0.01;
    sim::Engine e;
    sim::Fluid f(e), f2(e);
    Dragonfly d(f, net, 100, Routing::minimal, 0, m, 11),
        d2(f2, net, 100, Routing::minimal, 0, m, 11);
    const auto uses = uses_of(d, 0, 16), uses2 = uses_of(d2, 0, 16);
    REQUIRE(uses.size() == 3);
    for (const auto& [r, w] : uses) CHECK(d.redrawn(r));
    const double bytes = 20e9;  // ~0.2–0.3 s: 20–30 bursts
    double expected = 0, moved = 0;
    for (std::int64_t j = 0; moved < bytes; ++j) {
      d2.redraw(j);
      double rate = INFINITY;
      for (const auto& [r, w] : uses2) rate = std::min(rate, f2.capacity(r));
      const double dt = std::min(m.burst_s, (bytes - moved) / rate);
      moved += rate * dt, expected += dt;
    }
    for (std::int64_t j = 1; j < 100; ++j)
      e.at(sim::Time::s(m.burst_s * static_cast<double>(j)), [&d, j] { d.redraw(j); });
    double end = 0;
    std::vector<sim::Fluid::Use> u;
    for (const auto& [r, w] : uses) u.push_back({r, w});
    f.start(bytes, u, sim::Fluid::kUnbounded, [&] { end = e.now().to_s(); });
    e.run();
    CHECK(end == doctest::Approx(expected).epsilon(1e-6));
    // Without bursts the first draw holds: another time (the draws differ).
    d2.redraw(0);
    double first = INFINITY;
    for (const auto& [r, w] : uses2) first = std::min(first, f2.capacity(r));
    CHECK(end != doctest::Approx(bytes / first).epsilon(1e-3));
  }

  TEST_CASE("the slowest of N jittered GPUs: P(all ≥ 1 − σt) = P(|z| < t)^N = erf(t/√2)^N") {
    SharedMachine m;
    m.step_jitter = 0.02;
    const int n = 96, samples = 3000;
    const double t = 2.5, expected = std::pow(std::erf(t / std::sqrt(2.0)), n);  // 0.30
    int all_above = 0;
    for (int s = 0; s < samples; ++s) {
      m.sample = s;
      const auto seed = sample_seed(m, 1);
      double low = 1;
      for (int g = 0; g < n; ++g) low = std::min(low, jitter_speed(m, seed, g));
      all_above += low >= 1 - m.step_jitter * t ? 1 : 0;
    }
    CHECK(static_cast<double>(all_above) / samples == doctest::Approx(expected).epsilon(0.1));
  }

  TEST_CASE("recurring slow nodes: the same nodes every sample, their share as asked") {
    SharedMachine m;
    m.slow_node_fraction = 0.1;
    m.slow_node_speed = 0.8;
    int slow = 0;
    for (int node = 0; node < 20000; ++node) slow += node_speed(m, node) < 1 ? 1 : 0;
    CHECK(slow / 20000.0 == doctest::Approx(0.1).epsilon(0.05));
    m.sample = 5;
    CHECK(node_speed(m, 123) ==
          node_speed(SharedMachine{.slow_node_fraction = 0.1, .slow_node_speed = 0.8}, 123));
  }

  TEST_CASE("groups an all-reduce across replicas spans: the nodes at one position of each") {
    NetworkSpec net{4 * 10, 10, 5, 2, 100, 1, 50};  // 4 groups of 10 nodes
    // Replicas of 2 nodes: {0, 10}, {20, 11}, {1, 12}: position 0 → groups 0, 2, 0 (2 groups);
    // position 1 → 1, 1, 1 (1 group).
    CHECK(groups_across_blocks_max({0, 10, 20, 11, 1, 12}, 2, net) == 2);
    CHECK(groups_per_block({0, 10, 20, 11, 1, 12}, 2, net) == std::vector<int>{2, 2, 2});
    CHECK(groups_across_blocks_max({0, 1, 2, 3}, 2, net) == 1);  // all in group 0
  }

  TEST_CASE(
      "Slurm on a busy machine: one group when one has room, else the fullest-free groups first") {
    NetworkSpec net{4 * 10, 10, 5, 2, 100, 1, 50};  // 4 groups of 10 nodes
    PlacementOptions o;
    o.policy = PlacementPolicy::slurm;
    o.shared.busy_fraction = 0.5;
    for (int sample = 0; sample < 20; ++sample) {
      o.shared.sample = sample;
      CAPTURE(sample);
      // 15 nodes cannot fit one group (10 nodes): the fewest groups whose free nodes hold them.
      const auto ids = place_nodes(15, o, net);
      REQUIRE(ids.size() == 15);
      CHECK(std::set<int>(ids.begin(), ids.end()).size() == 15);
      const auto spans = groups_per_block(ids, 15, net)[0];
      // 20 busy of 40 (at most 40 − 15 = 25): the free counts per group sum to 20; the job's
      // groups are the top ones by free count, so it spans k with top-(k−1) < 15 ≤ top-k.
      std::vector<int> per(4, 0);
      for (int id : ids) ++per[static_cast<std::size_t>(id / 10)];
      int used = 0;
      for (int c : per) used += c > 0 ? 1 : 0;
      CHECK(spans == used);
      CHECK(spans >= 2);
      CHECK(place_nodes(15, o, net) == ids);  // deterministic per sample
      // 4 nodes: some group has 4 free (20 free over 4 groups): one group.
      CHECK(groups_per_block(place_nodes(4, o, net), 4, net)[0] == 1);
    }
  }
}
