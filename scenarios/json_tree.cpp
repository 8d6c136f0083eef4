#include "scenarios/json_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace twin::scenarios {

std::string Origins::of(const std::string& path, const std::string& fallback) const {
  std::string p = path;
  while (true) {
    if (auto it = at_.find(p); it != at_.end()) return it->second;
    const auto dot = p.rfind('.');
    if (dot == std::string::npos) return fallback;
    p.resize(dot);
  }
}

void Origins::record_tree(const Json& node, const std::string& path, const std::string& origin) {
  record(path, origin);
  if (node.is_object())
    for (const auto& [k, v] : node.items()) record_tree(v, join_path(path, k), origin);
}

std::vector<std::string> split_path(const std::string& dotted) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto dot = dotted.find('.', start);
    parts.push_back(dotted.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

const Json* find_path(const Json& root, const std::string& dotted) {
  const Json* node = &root;
  for (const auto& part : split_path(dotted)) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

Json& make_path(Json& root, const std::string& dotted) {
  Json* node = &root;
  for (const auto& part : split_path(dotted)) {
    if (node->is_null()) *node = Json::object();
    if (!node->is_object()) throw std::invalid_argument("not an object");
    node = &(*node)[part];
  }
  return *node;
}

void deep_merge(Json& dst, const Json& src, const std::string& path, const std::string& origin,
                Origins& origins) {
  if (!dst.is_object() || !src.is_object()) {
    dst = src;
    origins.record_tree(src, path, origin);
    return;
  }
  for (const auto& [k, v] : src.items()) {
    const auto child = join_path(path, k);
    if (dst.contains(k)) {
      deep_merge(dst[k], v, child, origin, origins);
    } else {
      dst[k] = v;
      origins.record_tree(v, child, origin);
    }
  }
}

bool valid_utf8(const std::string& s) {
  // RFC 3629's well-formed sequences: no overlong forms, no surrogates, nothing above U+10FFFF
  // (what nlohmann's writer accepts; anything else would make it throw on output).
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  const auto in = [](unsigned char c, unsigned char lo, unsigned char hi) {
    return c >= lo && c <= hi;
  };
  while (p < end) {
    const unsigned char c = *p;
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c < 0x80)
      n = 1;
    else if (in(c, 0xC2, 0xDF))
      n = 2;
    else if (c == 0xE0)
      n = 3, lo = 0xA0;
    else if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF))
      n = 3;
    else if (c == 0xED)
      n = 3, hi = 0x9F;
    else if (c == 0xF0)
      n = 4, lo = 0x90;
    else if (in(c, 0xF1, 0xF3))
      n = 4;
    else if (c == 0xF4)
      n = 4, hi = 0x8F;
    else
      return false;
    if (static_cast<std::size_t>(end - p) < n) return false;
    if (n > 1 && !in(p[1], lo, hi)) return false;
    for (std::size_t k = 2; k < n; ++k)
      if (!in(p[k], 0x80, 0xBF)) return false;
    p += n;
  }
  return true;
}

namespace {

// One pass over the text (nlohmann's SAX interface): depth, keys per object, key lengths,
// duplicates, UTF-8; stops at the first problem.
class TextCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TextCheck(const JsonLimits& l) : l_(l) {}
  std::string problem;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool string(string_t& s) override { return valid_utf8(s) || fail("a string that is not UTF-8"); }
  bool start_object(std::size_t) override {
    if (!open()) return false;
    objects_.push_back({path_.size(), {}});
    return true;
  }
  bool key(string_t& k) override {
    if (k.size() > l_.max_key_bytes)
      return fail(fmt::format("a key longer than {} bytes", l_.max_key_bytes));
    if (k.empty())
      return fail("an empty key in " + (objects_.back().prefix
                                            ? path_.substr(0, objects_.back().prefix)
                                            : "the top object"));
    if (!valid_utf8(k)) return fail("a key that is not UTF-8");
    auto& o = objects_.back();
    if (o.keys.size() >= l_.max_keys)
      return fail(fmt::format("an object with more than {} keys", l_.max_keys));
    path_.resize(o.prefix);
    path_ = join_path(path_, k);
    if (!o.keys.insert(k).second) return fail(fmt::format("duplicate key {}", path_));
    return true;
  }
  bool end_object() override {
    path_.resize(objects_.back().prefix);
    objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the parser itself reports it, with line and column
  }

 private:
  struct Object {
    std::size_t prefix;  // path_'s length at the object
    std::unordered_set<std::string> keys;
  };
  bool open() {
    return ++depth_ <= l_.max_depth ||
           fail(fmt::format("nested deeper than {} levels", l_.max_depth));
  }
  bool fail(std::string why) {
    problem = std::move(why);
    return false;
  }
  const JsonLimits& l_;
  int depth_ = 0;
  std::string path_;
  std::vector<Object> objects_;
};

}  // namespace

std::string json_text_problem(const std::string& text, const JsonLimits& limits) {
  TextCheck check(limits);
  nlohmann::json::sax_parse(text, &check, nlohmann::json::input_format_t::json, false);
  return check.problem;
}

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::string closest_key(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  if (key.size() > 64) return best;  // no key is that long; the distances would cost len²
  std::size_t best_d = std::max<std::size_t>(3, key.size() / 3) + 1;
  for (const auto& k : known) {
    const auto d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

std::string content_hash(const Json& j) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : j.dump()) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

}  // namespace twin::scenarios
