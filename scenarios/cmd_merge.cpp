// `twin merge`: joins the parts that `twin sweep --shard I/N --out PART` wrote (one per shard,
// e.g. from the tasks of a Slurm job array) into exactly the file one unsharded sweep writes.
// Every part must be of the same sweep (arguments, resolved scenario, twin version) and every
// shard present once with all of its points; otherwise nothing is written.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <ostream>

#include "reports/output.hpp"
#include "scenarios/commands.hpp"

namespace twin::scenarios {

namespace {

// One part, checked on its own: its shape, and that its rows are exactly its shard's points.
Json read_part(const std::string& file) {
  const Json p = read_json_file(file);
  auto need = [&](const char* key, bool ok, const char* what) {
    if (!ok)
      throw InputError(file, key, fmt::format("expected {} (a `twin sweep --shard` part)", what));
  };
  need("twin_sweep_part", p.is_object() && p.value("twin_sweep_part", 0) == 1, "1");
  need("sweep", p.contains("sweep") && p["sweep"].is_object(), "the sweep's arguments");
  need("shards",
       p.contains("shards") && p["shards"].is_number_unsigned() &&
           p["shards"].get<std::size_t>() >= 1,
       "the number of shards");
  need("shard", p.contains("shard") && p["shard"].is_number_unsigned() && p["shard"] < p["shards"],
       "this part's shard, below shards");
  need("points", p.contains("points") && p["points"].is_number_unsigned(),
       "the sweep's number of points");
  need("rows", p.contains("rows") && p["rows"].is_array(), "an array of rows");
  const std::size_t shard = p["shard"], shards = p["shards"], points = p["points"];
  std::size_t expect = shard;
  for (std::size_t j = 0; j < p["rows"].size(); ++j, expect += shards) {
    const auto& r = p["rows"][j];
    if (!r.is_object() || !r.contains("row") || !r["row"].is_object() ||
        r.value("i", Json()) != expect)
      throw InputError(file, fmt::format("rows[{}]", j),
                       fmt::format("expected {{\"i\": {}, \"row\": {{...}}}}", expect));
  }
  if (expect < points)
    throw InputError(file, "rows",
                     fmt::format("point {} of shard {}/{} is missing (an unfinished shard?)",
                                 expect, shard, shards));
  return p;
}

}  // namespace

int cmd_merge(const MergeArgs& args, std::ostream& out) {
  if (args.parts.empty()) throw InputError("twin merge", "", "no parts given");
  if (!args.out.empty()) {
    std::vector<std::filesystem::path> inputs(args.parts.begin(), args.parts.end());
    if (const auto why = reports::output_problem(args.out, inputs); !why.empty())
      throw InputError("--out", "", args.out + ": " + why);
  }
  std::map<std::size_t, std::pair<std::string, Json>> by_shard;
  for (const auto& file : args.parts) {
    Json p = read_part(file);
    if (!by_shard.empty()) {
      const auto& [first_file, first] = by_shard.begin()->second;
      for (const char* key : {"sweep", "shards", "points"})
        if (p[key] != first[key])
          throw InputError(file, key,
                           fmt::format("not the sweep of {} ({} differs)", first_file, key));
    }
    const std::size_t shard = p["shard"];
    if (by_shard.count(shard))
      throw InputError(file, "shard",
                       fmt::format("shard {} is also {}", shard, by_shard[shard].first));
    by_shard.emplace(shard, std::pair{file, std::move(p)});
  }
  const std::size_t shards = by_shard.begin()->second.second["shards"],
                    points = by_shard.begin()->second.second["points"];
  for (std::size_t s = 0; s < shards; ++s)
    if (!by_shard.count(s))
      throw InputError("twin merge", "",
                       fmt::format("shard {}/{} is missing: give every part", s, shards));
  Json rows = Json::array();
  for (std::size_t i = 0; i < points; ++i)
    rows.push_back(std::move(by_shard[i % shards].second["rows"][i / shards]["row"]));
  const bool json = args.json || args.out.ends_with(".json");
  const std::string text = json ? rows.dump(2) + "\n" : to_csv(rows);
  if (args.out.empty())
    out << text;
  else
    reports::write_atomic(args.out, text);
  return 0;
}

}  // namespace twin::scenarios
