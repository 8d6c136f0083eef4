// Helpers over JSON trees for the loader: dotted paths, deep merge with a record of which file
// set each value (so an error can name it), and key suggestions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twin::scenarios {

using Json = nlohmann::ordered_json;

// Where each value came from: dotted path → file (or "--set").
class Origins {
 public:
  void record(const std::string& path, const std::string& origin) { at_[path] = origin; }
  // The origin of `path`: its own or its nearest recorded ancestor's.
  std::string of(const std::string& path, const std::string& fallback) const;
  void record_tree(const Json& node, const std::string& path, const std::string& origin);

 private:
  std::map<std::string, std::string> at_;
};

std::vector<std::string> split_path(const std::string& dotted);
std::string join_path(const std::string& prefix, const std::string& key);
const Json* find_path(const Json& root, const std::string& dotted);
// Creates intermediate objects; throws std::invalid_argument if a non-object is in the way.
Json& make_path(Json& root, const std::string& dotted);

// Overlays `src` on `dst`: objects merge key by key, anything else replaces.
void deep_merge(Json& dst, const Json& src, const std::string& path, const std::string& origin,
                Origins& origins);

// Limits on JSON text the loader reads, checked in one pass before parsing (the parser keeps
// key order, so it is quadratic in an object's keys; the tree walks recurse).
struct JsonLimits {
  int max_depth = 64;
  std::size_t max_keys = 4096;      // per object (a scenario has ~100)
  std::size_t max_key_bytes = 256;  // the longest key of any schema is ~40
};
// Why `text` may not be parsed — nesting, an object's key count, a key's length, a duplicate key
// (with its dotted path), a string that is not UTF-8 — or "" if it may. Syntax errors are left
// to the parser, which reports their line and column.
std::string json_text_problem(const std::string& text, const JsonLimits& limits = {});
// Whether `s` is well-formed UTF-8.
bool valid_utf8(const std::string& s);
// A content hash of a JSON value (FNV-1a of its compact text, 16 hex digits): the resolved
// scenario's, so that outputs say which inputs made them.
std::string content_hash(const Json& j);

// The known key closest to `key` by edit distance, or "" if none is close.
std::string closest_key(const std::string& key, const std::vector<std::string>& known);

}  // namespace twin::scenarios
