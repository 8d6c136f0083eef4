// Self-describing parameters (SimGrid's config::Flag, ns-3's AddAttribute): each parameter is
// described once — key, unit, default, range, help — next to the code that uses it, and the same
// table drives the strict loader (scenarios/) and `twin help-params`. Nothing here knows JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace twin::sim {

using ParamValue = std::variant<bool, std::int64_t, double, std::string, std::vector<double>>;
// reals: a list of numbers, each within [min, max] (a measured table's column).
enum class ParamType { boolean, integer, real, text, choice, reals };

struct ParamSpec {
  std::string key;  // dotted path below the schema's root, e.g. "training.seq_len"
  ParamType type = ParamType::real;
  std::string unit;  // "" when the value is a pure count or flag
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;         // ParamType::choice only
  std::optional<ParamValue> default_value;  // nullopt: the key is required
  std::string help;
  bool sourced = false;  // the value must carry a `source` note (hardware profiles)
};

// An input error tied to a parameter key; the loader adds the file and JSON path.
struct ParamError : std::runtime_error {
  ParamError(std::string key_, const std::string& what)
      : std::runtime_error(what), key(std::move(key_)) {}
  // A conflict of keys: the loader blames the one the user set most specifically (the first
  // named where they tie).
  ParamError(std::string key_, std::string also_, const std::string& what)
      : std::runtime_error(what), key(std::move(key_)), also{std::move(also_)} {}
  ParamError(std::string key_, std::vector<std::string> also_, const std::string& what)
      : std::runtime_error(what), key(std::move(key_)), also(std::move(also_)) {}
  std::string key;
  std::vector<std::string> also;
};

std::string type_name(ParamType t);
std::string format_value(const ParamValue& v);

// One value of an enumeration parameter and its name in scenario files.
template <class E>
struct Named {
  E value;
  const char* name;
};

// An enumeration's table as the schema takes it, and a value's name (for outputs).
template <class E, std::size_t N>
std::vector<Named<E>> names(const Named<E> (&table)[N]) {
  return {table, table + N};
}
template <class E, std::size_t N>
const char* name_of(E value, const Named<E> (&table)[N]) {
  for (const auto& n : table)
    if (n.value == value) return n.name;
  return "?";
}

// The parameters of a struct T: how to describe, set and read each one.
//
// Defaults: a parameter registered without a default value takes the one T's member initializer
// gives (each default is written once, next to the field); one registered with std::nullopt is
// required.
template <class T>
class Schema {
 public:
  struct Entry {
    ParamSpec spec;
    std::function<void(T&, const ParamValue&)> set;
    std::function<ParamValue(const T&)> get;
  };

  // `ref` maps a T& (and a const T&) to the field's reference: write it as a generic lambda,
  // `[](auto& s) -> auto& { return s.field; }`.
  template <class Ref>
  Schema& integer(std::string key, std::string unit, double min, double max,
                  std::optional<std::int64_t> def, std::string help, Ref ref) {
    return add({key, ParamType::integer, unit, min, max, {}, wrap(def), help}, ref,
               [](const ParamValue& v) { return std::get<std::int64_t>(v); });
  }
  template <class Ref>
  Schema& real(std::string key, std::string unit, double min, double max, std::optional<double> def,
               std::string help, Ref ref) {
    return add({key, ParamType::real, unit, min, max, {}, wrap(def), help}, ref,
               [](const ParamValue& v) { return std::get<double>(v); });
  }
  // The same, with the default of T's member initializer.
  template <class Ref>
  Schema& integer(std::string key, std::string unit, double min, double max, std::string help,
                  Ref ref) {
    return integer(std::move(key), std::move(unit), min, max,
                   std::optional<std::int64_t>(field_default(ref)), std::move(help), ref);
  }
  template <class Ref>
  Schema& real(std::string key, std::string unit, double min, double max, std::string help,
               Ref ref) {
    return real(std::move(key), std::move(unit), min, max,
                std::optional<double>(field_default(ref)), std::move(help), ref);
  }
  template <class Ref>
  Schema& boolean(std::string key, std::string help, Ref ref) {
    return boolean(std::move(key), std::optional<bool>(field_default(ref)), std::move(help), ref);
  }
  template <class Ref>
  Schema& text(std::string key, std::string help, Ref ref) {
    return text(std::move(key), std::optional<std::string>(field_default(ref)), std::move(help),
                ref);
  }
  // An enumeration stored as its value, named in files by `names` (ns-3's EnumValue): options
  // are compared as values in the code, a typo in a file is an error naming the choices.
  template <class E, class Ref>
  Schema& enumeration(std::string key, std::vector<Named<E>> names, std::string help, Ref ref) {
    const E def = field_default(ref);
    ParamSpec spec{std::move(key), ParamType::choice, "", 0, 0, {}, std::nullopt, std::move(help)};
    for (const auto& n : names) {
      spec.choices.emplace_back(n.name);
      if (n.value == def) spec.default_value = ParamValue(std::string(n.name));
    }
    Entry e{std::move(spec), {}, {}};
    e.set = [ref, names](T& t, const ParamValue& v) {
      const auto& s = std::get<std::string>(v);
      for (const auto& n : names)
        if (s == n.name) return void(ref(t) = n.value);
      throw ParamError("", "\"" + s + "\" is not a choice");
    };
    e.get = [ref, names](const T& t) {
      for (const auto& n : names)
        if (ref(t) == n.value) return ParamValue(std::string(n.name));
      return ParamValue(std::string("?"));
    };
    entries_.push_back(std::move(e));
    return *this;
  }
  template <class Ref>
  Schema& reals(std::string key, std::string unit, double min, double max,
                std::optional<std::vector<double>> def, std::string help, Ref ref) {
    return add({key, ParamType::reals, unit, min, max, {}, wrap(def), help}, ref,
               [](const ParamValue& v) { return std::get<std::vector<double>>(v); });
  }
  template <class Ref>
  Schema& boolean(std::string key, std::optional<bool> def, std::string help, Ref ref) {
    return add({key, ParamType::boolean, "", 0, 1, {}, wrap(def), help}, ref,
               [](const ParamValue& v) { return std::get<bool>(v); });
  }
  template <class Ref>
  Schema& text(std::string key, std::optional<std::string> def, std::string help, Ref ref) {
    return add({key, ParamType::text, "", 0, 0, {}, wrap(def), help}, ref,
               [](const ParamValue& v) { return std::get<std::string>(v); });
  }
  // An enumeration stored as its string; `ref` yields a std::string&.
  template <class Ref>
  Schema& choice(std::string key, std::vector<std::string> choices, std::optional<std::string> def,
                 std::string help, Ref ref) {
    return add({key, ParamType::choice, "", 0, 0, std::move(choices), wrap(def), help}, ref,
               [](const ParamValue& v) { return std::get<std::string>(v); });
  }

  // Marks every entry added so far as needing a `source` note.
  Schema& all_sourced() {
    for (auto& e : entries_) e.spec.sourced = true;
    return *this;
  }

  // Adds a sub-schema under `prefix.`; `member` maps T& to the sub-struct's reference.
  template <class U, class Member>
  Schema& include(const std::string& prefix, const Schema<U>& sub, Member member) {
    for (const auto& e : sub.entries()) {
      Entry n{e.spec, {}, {}};
      n.spec.key = prefix + "." + e.spec.key;
      n.set = [member, s = e.set](T& t, const ParamValue& v) { s(member(t), v); };
      n.get = [member, g = e.get](const T& t) { return g(member(t)); };
      entries_.push_back(std::move(n));
    }
    return *this;
  }

  const std::vector<Entry>& entries() const { return entries_; }

  // Sets every parameter that has a default (used to build a struct from defaults alone).
  void apply_defaults(T& t) const {
    for (const auto& e : entries_)
      if (e.spec.default_value) e.set(t, *e.spec.default_value);
  }

 private:
  template <class Ref>
  static auto field_default(Ref ref) {
    const T t{};
    return std::decay_t<decltype(ref(t))>(ref(t));
  }
  template <class V>
  static std::optional<ParamValue> wrap(const std::optional<V>& v) {
    if (!v) return std::nullopt;
    return ParamValue(*v);
  }
  template <class Ref, class Conv>
  Schema& add(ParamSpec spec, Ref ref, Conv conv) {
    Entry e{std::move(spec), {}, {}};
    e.set = [ref, conv](T& t, const ParamValue& v) { ref(t) = conv(v); };
    e.get = [ref](const T& t) { return ParamValue(ref(t)); };
    entries_.push_back(std::move(e));
    return *this;
  }
  std::vector<Entry> entries_;
};

}  // namespace twin::sim
