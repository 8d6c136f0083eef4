#include "calibrate/launch_records.hpp"

#include <fstream>
#include <stdexcept>

namespace twin::calibrate {

using Json = nlohmann::json;

Json read_measurement(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file + ": cannot open");
  try {
    return Json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(file + ": invalid JSON: " + e.what());
  }
}

const Json* major_launch(const Json& c) {
  const Json* best = nullptr;
  for (const auto& l : c["launches"])
    if (l.contains("grid") && l["grid"].is_array() &&
        (!best || l.value("dur_us", 0.0) > best->value("dur_us", 0.0)))
      best = &l;
  return best;
}

double product(const Json& v) {
  double p = 1;
  for (const auto& x : v) p *= x.get<double>();
  return p;
}

bool split_k_launch(const Json& l) {
  return l.value("name", "").find("splitK") != std::string::npos;
}

}  // namespace twin::calibrate
