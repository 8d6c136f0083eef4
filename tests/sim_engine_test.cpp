// Tier 1: the engine on hand-solvable cases; each derivation is in the comment.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/engine.hpp"
#include "sim/fluid.hpp"
#include "sim/large_pages.hpp"
#include "sim/task.hpp"

using namespace twin::sim;

TEST_SUITE("sim.engine") {
  TEST_CASE("events fire by (time, priority, insertion order)") {
    Engine e;
    std::string order;
    e.at(Time::ns(10), [&] { order += "c"; });
    e.at(Time::ns(5), [&] { order += "a"; });
    e.at(Time::ns(10), [&] { order += "d"; });
    e.at(
        Time::ns(10), [&] { order += "b"; }, Priority::completion);
    e.at(
        Time::ns(10), [&] { order += "e"; }, Priority::start);
    CHECK(e.run() == 5);
    CHECK(order == "abcde");
    CHECK(e.now() == Time::ns(10));
  }
  TEST_CASE("a cancelled event never fires; a moved one fires once, as if scheduled anew") {
    Engine e;
    std::string order;
    const EventId a = e.at(Time::ns(10), [&] { order += "a"; });
    const EventId b = e.at(Time::ns(20), [&] { order += "b"; });
    e.at(Time::ns(5), [&] { order += "c"; });
    const EventId d = e.at(Time::ns(30), [&] { order += "d"; });
    e.at(Time::ns(15), [&] { order += "e"; });
    CHECK(e.cancel(a));
    CHECK_FALSE(e.cancel(a));  // already gone
    // Moved to 15 ns: after "e", scheduled earlier at the same instant (a new sequence).
    CHECK(e.move(d, Time::ns(15)));
    CHECK(e.move(b, Time::ns(1)));  // earlier: rises to the top
    CHECK(e.pending() == 4);
    CHECK(e.run() == 4);
    CHECK(order == "bced");
    CHECK_FALSE(e.move(b, Time::ns(40)));  // already ran
    CHECK_FALSE(e.cancel(d));
    // A slot reused by a new event is not reached through an old id.
    const EventId f = e.at(Time::ns(50), [&] { order += "f"; });
    CHECK(f.slot == d.slot);
    CHECK_FALSE(e.cancel(d));
    CHECK_THROWS_AS(e.move(f, Time::ns(1)), std::logic_error);  // the past
    e.run();
    CHECK(order == "bcedf");
  }
  TEST_CASE("cancelling and moving keep the heap ordered (against a sorted reference)") {
    // 2,000 events at pseudo-random times; every third is moved, every fifth cancelled. The
    // order they fire in must be the (time, sequence) order of what is left.
    Engine e;
    std::vector<int> fired;
    std::vector<EventId> ids;
    std::uint64_t x = 12345;
    auto next = [&] {
      return static_cast<std::int64_t>((x = x * 6364136223846793005ULL + 1) >> 44);
    };
    std::vector<std::int64_t> when(2000);
    std::vector<int> seq(2000);
    int s = 0;
    for (int i = 0; i < 2000; ++i) {
      when[i] = next();
      seq[i] = s++;
      ids.push_back(e.at(Time::ns(when[i]), [&fired, i] { fired.push_back(i); }));
    }
    std::vector<bool> gone(2000);
    for (int i = 0; i < 2000; ++i) {
      if (i % 5 == 0) {
        CHECK(e.cancel(ids[i]));
        gone[i] = true;
      } else if (i % 3 == 0) {
        when[i] = next();
        seq[i] = s++;
        CHECK(e.move(ids[i], Time::ns(when[i])));
      }
    }
    std::vector<std::pair<std::pair<std::int64_t, int>, int>> ref;
    for (int i = 0; i < 2000; ++i)
      if (!gone[i]) ref.push_back({{when[i], seq[i]}, i});
    std::sort(ref.begin(), ref.end());
    e.run();
    REQUIRE(fired.size() == ref.size());
    bool same = true;
    for (std::size_t k = 0; k < ref.size(); ++k) same = same && fired[k] == ref[k].second;
    CHECK(same);
  }
  TEST_CASE("an event budget stops a runaway simulation with an error") {
    Engine e;
    e.set_event_limit(100);
    std::function<void()> again = [&] { e.after(Time::ns(1), again); };
    e.at(Time{}, again);
    CHECK_THROWS_AS(e.run(), EventLimitExceeded);
  }
}

TEST_SUITE("sim.fluid") {
  TEST_CASE("two flows on one link share it, then the survivor takes it all") {
    // C = 10 B/s; flows of 10 B and 20 B get 5 B/s each: the first ends at 2 s having moved
    // 10 B; the second has 10 B left, now alone at 10 B/s: it ends at 3 s.
    Engine e;
    Fluid f(e);
    const auto link = f.add_resource(10, "link");
    Time t1, t2;
    f.start(10, {{link, 1}}, Fluid::kUnbounded, [&] { t1 = e.now(); });
    f.start(20, {{link, 1}}, Fluid::kUnbounded, [&] { t2 = e.now(); });
    e.run();
    CHECK(t1.to_s() == doctest::Approx(2));
    CHECK(t2.to_s() == doctest::Approx(3));
  }
  TEST_CASE("saturated time: a link is full while flows fill it, not while a bound holds them") {
    // C = 10 B/s. Two unbounded flows of 10 B and 20 B fill it until 3 s (saturated 3 s); then
    // a flow bounded at 5 B/s moves 10 B in 2 s without filling it (still 3 s).
    Engine e;
    Fluid f(e);
    const auto link = f.add_resource(10, "link");
    f.start(10, {{link, 1}}, Fluid::kUnbounded, [] {});
    f.start(20, {{link, 1}}, Fluid::kUnbounded, [&] { f.start(10, {{link, 1}}, 5, [] {}); });
    e.run();
    CHECK(e.now().to_s() == doctest::Approx(5));
    CHECK(f.saturated_s(link) == doctest::Approx(3));
  }
  TEST_CASE("a flow capped by its bound (its CTAs) runs at the bound") {
    // C = 100 B/s, bound 20 B/s (4 CTAs × 5 B/s): 100 B take 5 s.
    Engine e;
    Fluid f(e);
    const auto link = f.add_resource(100, "link");
    Time t;
    f.start(100, {{link, 1}}, 20, [&] { t = e.now(); });
    e.run();
    CHECK(t.to_s() == doctest::Approx(5));
  }
  TEST_CASE("contending flows are slowed by the same factor of their solo speed") {
    // C = 100. A alone would run at its bound 20, B at 100: shares 20 and 100. λ·(20 + 100) =
    // 100 ⇒ λ = 5/6: A gets 16.67, B 83.33. Explicit equal shares give classic max-min: A is
    // capped at 20 and B takes the remaining 80.
    Engine e;
    Fluid f(e);
    const auto link = f.add_resource(100, "link");
    const auto a = f.start(1e9, {{link, 1}}, 20, {});
    const auto b = f.start(1e9, {{link, 1}}, Fluid::kUnbounded, {});
    const auto c = f.add_resource(100, "c");
    const auto x = f.start(1e9, {{c, 1}}, 20, {}, 1.0);
    const auto y = f.start(1e9, {{c, 1}}, Fluid::kUnbounded, {}, 1.0);
    f.settle();
    CHECK(f.rate(a) == doctest::Approx(100.0 / 6));
    CHECK(f.rate(b) == doctest::Approx(500.0 / 6));
    CHECK(f.rate(x) == doctest::Approx(20));
    CHECK(f.rate(y) == doctest::Approx(80));
  }
  TEST_CASE("max-min across two links: the bottleneck decides, the slack is reused") {
    // L1 = 10, L2 = 4. Flow x uses L1 and L2, y uses L1 only. Filling: both rise to 4, L2
    // saturates and fixes x at 4; y continues on L1's remaining 6 − ... to 10 − 4 = 6.
    Engine e;
    Fluid f(e);
    const auto l1 = f.add_resource(10, "l1"), l2 = f.add_resource(4, "l2");
    const auto x = f.start(1e9, {{l1, 1}, {l2, 1}}, Fluid::kUnbounded, {}, 1.0);
    const auto y = f.start(1e9, {{l1, 1}}, Fluid::kUnbounded, {}, 1.0);
    f.settle();
    CHECK(f.rate(x) == doctest::Approx(4));
    CHECK(f.rate(y) == doctest::Approx(6));
    CHECK(f.load(l1) == doctest::Approx(10));
  }
  TEST_CASE("weights: a flow that crosses a link twice consumes twice its rate") {
    // C = 12; x has weight 2, y weight 1, equal rates ρ: 3ρ = 12 ⇒ ρ = 4.
    Engine e;
    Fluid f(e);
    const auto l = f.add_resource(12, "l");
    const auto x = f.start(1, {{l, 2}}, Fluid::kUnbounded, {}, 1.0);
    const auto y = f.start(1, {{l, 1}}, Fluid::kUnbounded, {}, 1.0);
    f.settle();
    CHECK(f.rate(x) == doctest::Approx(4));
    CHECK(f.rate(y) == doctest::Approx(4));
  }
  TEST_CASE("a capacity change mid-flow re-times the completion") {
    // 100 B at 10 B/s; at 5 s (50 B left) the capacity drops to 5 B/s: 10 s more ⇒ ends at 15 s.
    Engine e;
    Fluid f(e);
    const auto l = f.add_resource(10, "l");
    Time t;
    f.start(100, {{l, 1}}, Fluid::kUnbounded, [&] { t = e.now(); });
    e.at(Time::s(5), [&] { f.set_capacity(l, 5); });
    CHECK(e.run() == 2);  // the change and the one completion: the first estimate was moved
    CHECK(t.to_s() == doctest::Approx(15));
  }
  TEST_CASE("a flow starved of its resource waits, then completes once") {
    // 10 B at 10 B/s; at 0.5 s the capacity drops to 0 (5 B left): no completion is pending;
    // at 2 s it is 5 B/s again: ends at 3 s. Three events: two changes and one completion.
    Engine e;
    Fluid f(e);
    const auto l = f.add_resource(10, "l");
    Time t;
    int done = 0;
    f.start(10, {{l, 1}}, Fluid::kUnbounded, [&] { t = e.now(), ++done; });
    e.at(Time::ms(500), [&] { f.set_capacity(l, 0); });
    e.at(Time::s(2), [&] { f.set_capacity(l, 5); });
    CHECK(e.run() == 3);
    CHECK(done == 1);
    CHECK(t.to_s() == doctest::Approx(3));
  }
  TEST_CASE("a cancelled flow's completion never fires") {
    Engine e;
    Fluid f(e);
    const auto l = f.add_resource(10, "l");
    int done = 0;
    const auto id = f.start(10, {{l, 1}}, Fluid::kUnbounded, [&] { ++done; });
    e.at(Time::ms(500), [&] { f.cancel(id); });
    CHECK(e.run() == 1);
    CHECK(done == 0);
    CHECK(e.pending() == 0);
  }
}

namespace {
// A chain of tasks whose trace is recorded as text: used for determinism and threads.
std::string run_chain(int n) {
  Engine e;
  Fluid f(e);
  TaskGraph g(e);
  const auto l = f.add_resource(1e9, "l");
  std::string trace;
  g.on_finish.connect([&](const Task& t) {
    trace += std::to_string(t.id()) + ":" + std::to_string(t.start_time().count_ns()) + "-" +
             std::to_string(t.end_time().count_ns()) + "\n";
  });
  Task* prev = nullptr;
  for (int i = 0; i < n; ++i) {
    Task& t = g.add("t");
    t.on_ready = [&f, l, i](Task& me) {
      f.start(1e6 * (1 + i % 7), {{l, 1}}, Fluid::kUnbounded, [&me] { me.finish(); });
    };
    if (prev && i % 3) t.after(*prev);
    prev = &t;
  }
  g.start();
  e.run();
  CHECK(g.finished() == g.size());
  return trace;
}
}  // namespace

TEST_SUITE("sim.task") {
  TEST_CASE("dependencies: a task starts when its last predecessor finishes") {
    Engine e;
    TaskGraph g(e);
    Task& a = g.add("a");
    Task& b = g.add("b");
    Task& c = g.add("c");
    a.on_ready = [&e](Task& t) { e.after(Time::ns(5), [&t] { t.finish(); }); };
    b.on_ready = [&e](Task& t) { e.after(Time::ns(9), [&t] { t.finish(); }); };
    c.after(a);
    c.after(b);
    g.start();
    e.run();
    CHECK(c.start_time() == Time::ns(9));
    CHECK(c.state() == Task::State::done);
  }
  TEST_CASE("successors in the order they were added, also when added after a first read") {
    Engine e;
    TaskGraph g(e);
    Task& a = g.add("a");
    Task& b = g.add("b");
    Task& c = g.add("c");
    Task& d = g.add("d");
    b.after(a), d.after(a), c.after(a);
    auto names = [](const Task& t) {
      std::string s;
      t.each_successor([&](const Task& n) { s += n.name; });
      return s;
    };
    CHECK(names(a) == "bdc");
    Task& x = g.add("x");  // a task and dependencies after the successors were indexed
    x.after(b), c.after(b);
    CHECK(names(a) == "bdc");
    CHECK(names(b) == "xc");
    std::string order;
    g.on_start.connect([&](const Task& t) { order += t.name; });
    g.start();
    e.run();
    CHECK(g.finished() == 5);
    CHECK(order == "abdxc");  // ready in successor order; c waited for b too
  }
  TEST_CASE("a long chain of markers finishing at once does not recurse") {
    Engine e;
    TaskGraph g(e);
    Task* prev = &g.add("m0");
    for (int i = 1; i < 200000; ++i) {
      Task& t = g.add("m");
      t.after(*prev);
      prev = &t;
    }
    g.start();
    e.run();
    CHECK(g.finished() == 200000);
    // Across the blocks of 65,536 tasks: ids and addresses as added.
    for (std::size_t i : {65535u, 65536u, 131072u, 199999u}) CHECK(g[i].id() == i);
    CHECK(&g[199999] == prev);
  }
  TEST_CASE("large pages: aligned, and a freed block is handed out again for the same size") {
    auto& r = large_pages();
    const std::size_t big = 13 * LargePages::kHugePage + 1;  // a size nothing else asks for
    void* a = r.allocate(big, 64);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % LargePages::kHugePage == 0);
    static_cast<char*>(a)[big - 1] = 1;  // usable to its end
    r.deallocate(a, big, 64);
    void* b = r.allocate(big, 64);
    CHECK(b == a);
    r.deallocate(b, big, 64);
    void* small = r.allocate(1000, 8);  // below 2 MiB: operator new
    CHECK(small != nullptr);
    r.deallocate(small, 1000, 8);
  }
  TEST_CASE("determinism: the same graph gives identical trace bytes") {
    CHECK(run_chain(500) == run_chain(500));
  }
  TEST_CASE("several engines run in threads and agree with a serial run") {
    const auto serial = run_chain(300);
    std::vector<std::string> out(4);
    std::vector<std::thread> th;
    for (int i = 0; i < 4; ++i) th.emplace_back([&out, i] { out[i] = run_chain(300); });
    for (auto& t : th) t.join();
    for (const auto& o : out) CHECK(o == serial);
  }
}

TEST_SUITE("sim.large_pages") {
  TEST_CASE("a chunked array keeps each appended run inside one chunk") {
    twin::sim::Chunked<int, 3> a;  // chunks of 8
    const int five[] = {1, 2, 3, 4, 5};
    CHECK(a.append_run(five, five + 5) == 0);
    CHECK(a.append_run(five, five + 2) == 5);  // fits the 3 left
    // 1 left in the first chunk: padded with a default element, the run starts the second.
    CHECK(a.append_run(five, five + 4) == 8);
    CHECK(a.size() == 12);
    CHECK(a[7] == 0);
    for (int i = 0; i < 4; ++i) CHECK(&a[8 + static_cast<std::size_t>(i)] == &a[8] + i);
    const int nine[9] = {};
    CHECK_THROWS_AS(a.append_run(nine, nine + 9), std::length_error);
  }
}
