#include "sim/param.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace twin::sim {

std::string type_name(ParamType t) {
  switch (t) {
    case ParamType::boolean:
      return "bool";
    case ParamType::integer:
      return "integer";
    case ParamType::real:
      return "number";
    case ParamType::text:
      return "string";
    case ParamType::choice:
      return "choice";
    case ParamType::reals:
      return "numbers";
  }
  return "?";
}

std::string format_value(const ParamValue& v) {
  struct V {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return fmt::format("{}", i); }
    std::string operator()(double d) const { return fmt::format("{}", d); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const std::vector<double>& v) const {
      return fmt::format("[{}]", fmt::join(v, ", "));
    }
  };
  return std::visit(V{}, v);
}

}  // namespace twin::sim
