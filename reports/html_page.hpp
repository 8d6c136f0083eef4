// One self-contained HTML page of Vega-Lite charts (issue #19): the chart libraries (Vega,
// Vega-Lite, vega-embed, from the npm registry: reports/web/package.json) are inlined, the
// charts' data are inlined in their specs, so the page works offline and without a server.
//
// The page exposes its state to a headless browser (tests/browser/check_report.mjs):
// window.twinCharts = {total, rendered, errors}, each chart's container marked
// data-rendered="1" once vega-embed has drawn it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twin::reports {

struct Chart {
  std::string title;
  std::string caption;  // what it shows and where its numbers come from
  nlohmann::json spec;  // a Vega-Lite spec with its data inline
};

struct Section {
  std::string title;
  std::vector<Chart> charts;
};

struct Page {
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  // headline label → value
  std::string provenance;                                  // version, scenario hash, command
  std::vector<Section> sections;
};

// The chart libraries to inline, in load order (vega, vega-lite, vega-embed), as text.
struct ChartLibraries {
  std::vector<std::string> scripts;
};
// Reads the minified builds under `node_modules` (reports/web/node_modules); throws
// std::runtime_error naming the missing file and how to install it.
ChartLibraries load_chart_libraries(const std::string& node_modules);

// The page's HTML (deterministic: the same page and libraries give the same bytes).
std::string html_page(const Page& page, const ChartLibraries& libs);

// Text safe inside a <script> element: no "</script" that would close it, no "<!--" (for
// JavaScript source and JSON whose occurrences are inside strings).
std::string script_safe(std::string text);
// Text safe as HTML element content.
std::string html_escape(const std::string& text);

}  // namespace twin::reports
