// Vega-Lite building blocks shared by the charts of `twin report` (report_charts.cpp,
// report_what_if_charts.cpp).
#pragma once

#include <string>
#include <utility>

#include "scenarios/loader.hpp"

namespace twin::scenarios::vega {

constexpr int kWidth = 900;

inline Json field(const char* name, const char* type, const std::string& title) {
  return {{"field", name}, {"type", type}, {"title", title}};
}

// A Vega-Lite spec with `values` as its data and `rest` (mark, encoding, facet, layer, …).
inline Json data_spec(Json values, Json rest = Json::object()) {
  rest["$schema"] = "https://vega.github.io/schema/vega-lite/v5.json";
  rest["data"] = {{"values", std::move(values)}};
  return rest;
}

// A chart of `values` with the given mark and encoding.
inline Json spec(Json values, Json mark, Json encoding, int height = 0) {
  Json s =
      data_spec(std::move(values),
                {{"width", kWidth}, {"mark", std::move(mark)}, {"encoding", std::move(encoding)}});
  if (height > 0) s["height"] = height;
  return s;
}

}  // namespace twin::scenarios::vega
