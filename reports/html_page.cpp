#include "reports/html_page.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace twin::reports {

namespace {

constexpr const char* kLibraryFiles[] = {"vega/build/vega.min.js",
                                         "vega-lite/build/vega-lite.min.js",
                                         "vega-embed/build/vega-embed.min.js"};

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-bottom: 0.2em; }
.facts { display: flex; flex-wrap: wrap; gap: 0.5em 2em; margin: 1em 0; }
.fact b { display: block; font-size: 1.3em; }
.caption { color: #555; font-size: 0.9em; margin: 0.2em 0 0.6em; }
.provenance { color: #777; font-size: 0.8em; }
.chart { overflow-x: auto; }
)";

// Renders every chart with vega-embed and records the outcome for a headless check.
constexpr const char* kDriver = R"(
window.twinCharts = {total: TWIN_SPECS.length, rendered: 0, errors: []};
window.addEventListener('error', e => window.twinCharts.errors.push(String(e.message)));
const failed = (i, err) => { window.twinCharts.errors.push('chart ' + i + ': ' + err); console.error(err); };
TWIN_SPECS.forEach((spec, i) => {
  const el = document.getElementById('chart-' + i);
  try {
    vegaEmbed(el, spec, {renderer: 'svg', actions: false})
      .then(() => { el.dataset.rendered = '1'; window.twinCharts.rendered += 1; })
      .catch(err => failed(i, err));
  } catch (err) {
    failed(i, err);
  }
});
)";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

ChartLibraries load_chart_libraries(const std::string& node_modules) {
  ChartLibraries libs;
  for (const char* f : kLibraryFiles) {
    const std::string path = node_modules + "/" + f;
    std::string text = read_file(path);
    if (text.empty())
      throw std::runtime_error(
          path +
          ": chart library missing; install them with `npm ci --prefix reports/web` "
          "(./run.sh and ./test.sh do)");
    libs.scripts.push_back(std::move(text));
  }
  return libs;
}

std::string script_safe(std::string text) {
  // Only "</script" (any case) ends a script element early, and "<!--" can start a comment-like
  // state; "<\/" and "\x3C!--" mean the same inside JSON strings and JavaScript strings.
  for (std::size_t p = 0; (p = text.find("</", p)) != std::string::npos; p += 2) {
    std::string next = text.substr(p + 2, 6);
    for (auto& c : next) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (next == "script") text.replace(p, 2, "<\\/");
  }
  for (std::size_t p = 0; (p = text.find("<!--", p)) != std::string::npos;)
    text.replace(p, 1, "\\x3C");
  return text;
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string html_page(const Page& page, const ChartLibraries& libs) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
    << html_escape(page.title) << "</title>\n<style>" << kStyle << "</style>\n";
  for (const auto& s : libs.scripts) h << "<script>" << script_safe(s) << "</script>\n";
  h << "</head>\n<body>\n<h1>" << html_escape(page.title) << "</h1>\n<div class=\"facts\">\n";
  for (const auto& [label, value] : page.facts)
    h << "<div class=\"fact\">" << html_escape(label) << "<b>" << html_escape(value)
      << "</b></div>\n";
  h << "</div>\n<p class=\"provenance\">" << html_escape(page.provenance) << "</p>\n";
  nlohmann::json specs = nlohmann::json::array();
  for (const auto& section : page.sections) {
    h << "<h2>" << html_escape(section.title) << "</h2>\n";
    for (const auto& c : section.charts) {
      h << "<h3>" << html_escape(c.title) << "</h3>\n<p class=\"caption\">"
        << html_escape(c.caption) << "</p>\n<div class=\"chart\" id=\"chart-" << specs.size()
        << "\"></div>\n";
      specs.push_back(c.spec);
    }
  }
  h << "<script>\nconst TWIN_SPECS = " << script_safe(specs.dump()) << ";\n"
    << kDriver << "</script>\n";
  h << "</body>\n</html>\n";
  return h.str();
}

}  // namespace twin::reports
