// The shared machine (hardware/shared_machine.hpp, issue #16): each draw against a closed form.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "hardware/cluster.hpp"
#include "hardware/placement.hpp"
#include "hardware/shared_machine.hpp"
#include "sim/engine.hpp"
#include "sim/fluid.hpp"

using namespace twin;
using namespace twin::hardware;

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
    Dragonfly::RouteSum sum;
    d.route(0, 16, 1.0, sum);
    std::map<sim::Fluid::ResourceId, double> uses;
    sum.drain(uses);
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
