// A sweep's rows read back from the file `twin sweep --out` wrote (CSV as to_csv writes it, or
// JSON), for `twin report --sweep`.
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "scenarios/commands.hpp"

namespace twin::scenarios {

namespace {

// One CSV record (RFC 4180 quoting, as `twin sweep` writes it).
std::vector<std::string> csv_record(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"')
      out.back() += '"', ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

Json csv_cell(const std::string& key, const std::string& c) {
  if (key.find('.') != std::string::npos) return c;  // grid values stay as written
  if (c == "true" || c == "false") return c == "true";
  char* end = nullptr;
  const double d = std::strtod(c.c_str(), &end);
  if (!c.empty() && end == c.c_str() + c.size()) return d;
  return c;
}

}  // namespace

Json read_sweep_rows(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file, "", "cannot open");
  if (file.size() > 5 && file.substr(file.size() - 5) == ".json") {
    Json j = read_json_file(file);
    if (!j.is_array())
      throw InputError(file, "", "expected the array of rows `twin sweep --out FILE.json` writes");
    return j;
  }
  std::string line;
  std::getline(in, line);
  const auto header = csv_record(line);
  Json rows = Json::array();
  for (std::size_t n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const auto cells = csv_record(line);
    if (cells.size() != header.size())
      throw InputError(
          file, "",
          fmt::format("line {}: {} cells, the header has {}", n, cells.size(), header.size()));
    Json r = Json::object();
    for (std::size_t i = 0; i < cells.size(); ++i) r[header[i]] = csv_cell(header[i], cells[i]);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace twin::scenarios
