// Tier 1: engine units (time, quantities, parameters, randomness).
#include <doctest/doctest.h>

#include <set>

#include "sim/param.hpp"
#include "sim/random.hpp"
#include "sim/units.hpp"

using namespace twin::sim;

TEST_SUITE("sim.units") {
  TEST_CASE("time has named constructors and integer nanoseconds") {
    CHECK(Time::us(10).count_ns() == 10'000);
    CHECK(Time::ms(1.5).count_ns() == 1'500'000);
    CHECK(Time::s(2).to_ms() == doctest::Approx(2000));
    CHECK(Time::ns(7) + Time::ns(3) == Time::ns(10));
    CHECK(Time::ns(1) < Time::ns(2));
  }
  TEST_CASE("duration rounds up so work is never declared done early") {
    // 1 byte at 3 bytes/s = 333,333,333.3 ns → 333,333,334 ns.
    CHECK(duration(bytes(1), BytesPerSec{3}).count_ns() == 333'333'334);
    CHECK(duration(GiB(1), GBps(1)).to_s() == doctest::Approx(1.073741824));
    CHECK(duration(bytes(0), GBps(1)) == Time{});
    CHECK(duration(bytes(1), BytesPerSec{0}) == Time::max());
  }
}

TEST_SUITE("sim.param") {
  struct S {
    std::int64_t n = 0;
    double x = 0;
    std::string c;
  };
  TEST_CASE("a schema sets defaults and reads fields back") {
    Schema<S> s;
    s.integer(
         "n", "tokens", 1, 10, 4, "count", [](auto& v) -> auto& { return v.n; })
        .choice(
            "c", {"a", "b"}, "b", "choice", [](auto& v) -> auto& { return v.c; })
        .real(
            "x", "GBps", 0, 1, std::nullopt, "rate", [](auto& v) -> auto& { return v.x; });
    S v;
    s.apply_defaults(v);
    CHECK(v.n == 4);
    CHECK(v.c == "b");
    CHECK(s.entries().size() == 3);
    CHECK(!s.entries()[2].spec.default_value);
    CHECK(std::get<std::int64_t>(s.entries()[0].get(v)) == 4);
    CHECK(format_value(ParamValue(std::string("b"))) == "\"b\"");
  }
  enum class Mode { off, fast };
  constexpr Named<Mode> kModes[] = {{Mode::off, "off"}, {Mode::fast, "fast"}};
  struct T {
    std::int64_t n = 7;
    Mode m = Mode::fast;
    bool on = true;
  };
  TEST_CASE("defaults come from the struct's initializers; enumerations are named at the edge") {
    Schema<T> s;
    s.integer(
         "n", "", 0, 10, "count", [](auto& v) -> auto& { return v.n; })
        .enumeration(
            "m", names(kModes), "mode", [](auto& v) -> auto& { return v.m; })
        .boolean(
            "on", "flag", [](auto& v) -> auto& { return v.on; });
    CHECK(std::get<std::int64_t>(*s.entries()[0].spec.default_value) == 7);
    CHECK(std::get<std::string>(*s.entries()[1].spec.default_value) == "fast");
    CHECK(s.entries()[1].spec.choices == std::vector<std::string>{"off", "fast"});
    CHECK(std::get<bool>(*s.entries()[2].spec.default_value));
    T v;
    s.entries()[1].set(v, ParamValue(std::string("off")));
    CHECK(v.m == Mode::off);
    CHECK(std::get<std::string>(s.entries()[1].get(v)) == "off");
    CHECK_THROWS_AS(s.entries()[1].set(v, ParamValue(std::string("slow"))), ParamError);
    CHECK(std::string(name_of(Mode::fast, kModes)) == "fast");
  }
}

TEST_SUITE("sim.random") {
  TEST_CASE("the same seed gives the same stream; draws stay in range") {
    Rng a(42), b(42), c(43);
    for (int i = 0; i < 100; ++i) CHECK(a.next() == b.next());
    CHECK(a.next() != c.next());
    std::set<std::uint64_t> seen;
    for (int i = 0; i < 1000; ++i) {
      const auto k = a.below(10);
      CHECK(k < 10);
      seen.insert(k);
      const double u = a.uniform();
      CHECK((u > 0 && u < 1));
    }
    CHECK(seen.size() == 10);
  }
  TEST_CASE("normal draws have mean 0 and variance 1 (within sampling error)") {
    Rng r(7);
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const double z = r.normal();
      s += z;
      s2 += z * z;
    }
    CHECK(s / n == doctest::Approx(0).epsilon(0.01).scale(1));  // |mean| < 0.01 ≈ 4.5σ
    CHECK(s2 / n == doctest::Approx(1).epsilon(0.02));
  }
}
