// `twin help-params`: every scenario key with unit, default, range and help, from the same
// table the loader checks against.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>
#include <ostream>

#include "scenarios/commands.hpp"

namespace twin::scenarios {

namespace {

bool numeric(const sim::ParamSpec& s) {
  return s.type == sim::ParamType::integer || s.type == sim::ParamType::real ||
         s.type == sim::ParamType::reals;
}

// A bound as written: integers whole (1048576, not 1.04858e+06), reals shortest.
std::string bound(const sim::ParamSpec& s, double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return s.type == sim::ParamType::integer ? fmt::format("{:.0f}", v) : fmt::format("{}", v);
}

std::string range_of(const sim::ParamSpec& s) {
  if (s.type == sim::ParamType::choice) return fmt::format("{}", fmt::join(s.choices, "|"));
  if (!numeric(s)) return "";
  return fmt::format("[{}, {}]", bound(s, s.min), bound(s, s.max));
}

// JSON: [min, max] as numbers (null for an unbounded side), the choices as a list.
Json range_json(const sim::ParamSpec& s) {
  if (s.type == sim::ParamType::choice) return Json(s.choices);
  if (!numeric(s)) return nullptr;
  const auto side = [&](double v) { return std::isinf(v) ? Json() : Json::parse(bound(s, v)); };
  return Json::array({side(s.min), side(s.max)});
}

}  // namespace

int cmd_help_params(bool json, std::ostream& out) {
  const auto& entries = scenario_schema().entries();
  if (json) {
    Json arr = Json::array();
    for (const auto& e : entries) {
      const auto& s = e.spec;
      Json j{{"key", s.key},   {"type", sim::type_name(s.type)},
             {"unit", s.unit}, {"range", range_json(s)},
             {"help", s.help}, {"needs_source", s.sourced}};
      j["default"] = s.default_value ? Json::parse(sim::format_value(*s.default_value)) : Json();
      arr.push_back(j);
    }
    out << arr.dump(2) << "\n";
    return 0;
  }
  fmt::print(out,
             "Scenario parameters (set in a scenario file or with --set KEY=VALUE).\n"
             "Keys without a default are required. Hardware values are written\n"
             "{{\"value\": V, \"source\": \"where V comes from\"}}.\n\n");
  fmt::print(out, "{:<44} {:<8} {:<8} {:<22} {}\n", "key", "type", "unit", "range", "default");
  for (const auto& e : entries) {
    const auto& s = e.spec;
    fmt::print(out, "{:<44} {:<8} {:<8} {:<22} {}\n    {}\n", s.key, sim::type_name(s.type), s.unit,
               range_of(s), s.default_value ? sim::format_value(*s.default_value) : "(required)",
               s.help);
  }
  return 0;
}

}  // namespace twin::scenarios
