// Tier 1: the HTML page writer (reports/html_page.hpp): what it inlines, escapes, and lays out.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "reports/html_page.hpp"

using namespace twin::reports;

TEST_SUITE("reports.html") {
  TEST_CASE("text inside a script element cannot close it") {
    CHECK(script_safe("a</script>b") == "a<\\/script>b");
    CHECK(script_safe("x</SCRIPT") == "x<\\/SCRIPT");
    CHECK(script_safe("/</g") == "/</g");  // a regular expression stays as it is
    CHECK(script_safe("<!-- x") == "\\x3C!-- x");
    CHECK(html_escape("<b a=\"1\">&") == "&lt;b a=&quot;1&quot;&gt;&amp;");
  }
  TEST_CASE("a page inlines its libraries and charts, in order, the same every time") {
    Page p;
    p.title = "t <1>";
    p.facts = {{"step", "1 s"}};
    p.provenance = "twin test";
    p.sections = {
        {"S",
         {{"A", "caption a", {{"mark", "bar"}, {"data", {{"values", {{{"x", "</script>"}}}}}}}},
          {"B", "caption b", {{"mark", "line"}}}}}};
    const ChartLibraries libs{{"var vega=1;", "var vl=2;", "var embed=3;"}};
    const auto html = html_page(p, libs);
    CHECK(html == html_page(p, libs));
    CHECK(html.find("<title>t &lt;1&gt;</title>") != std::string::npos);
    CHECK(html.find("var vega=1;") < html.find("var vl=2;"));
    CHECK(html.find("var vl=2;") < html.find("var embed=3;"));
    CHECK(html.find("id=\"chart-0\"") < html.find("id=\"chart-1\""));
    CHECK(html.find("<\\/script>") != std::string::npos);  // the data's "</script>", escaped
    CHECK(html.find("window.twinCharts") != std::string::npos);
    CHECK(html.find("http") == std::string::npos);  // nothing loaded from elsewhere
  }
  TEST_CASE("missing chart libraries are named with how to install them") {
    try {
      load_chart_libraries("/nonexistent/node_modules");
      FAIL("no error");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find("vega.min.js") != std::string::npos);
      CHECK(std::string(e.what()).find("npm ci --prefix reports/web") != std::string::npos);
    }
  }
}
