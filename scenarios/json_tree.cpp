#include "scenarios/json_tree.hpp"

#include <algorithm>
#include <stdexcept>

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
  std::size_t best_d = std::max<std::size_t>(3, key.size() / 3) + 1;
  for (const auto& k : known) {
    const auto d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

}  // namespace twin::scenarios
