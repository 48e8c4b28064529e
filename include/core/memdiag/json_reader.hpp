// The one strict JSON reader behind memdiag's own files: reports and case
// files (the core), plan files (the run layer). A JsonNode is a value plus where it sits ($.presets.small.model.
// depth); every complaint it makes is an InputError naming the file and that
// path, so a user can fix the file rather than guess.
#pragma once

#include "memdiag/enum_names.hpp"
#include "memdiag/suggest.hpp"
#include "memdiag/errors.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <iosfwd>
#include <string>
#include <utility>

namespace memdiag::detail {

class JsonNode {
 public:
  JsonNode(const nlohmann::json& j, std::string source, std::string path = "$")
      : j_(&j), source_(std::move(source)), path_(std::move(path)) {}

  const nlohmann::json& raw() const { return *j_; }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const std::string& message) const;
  // "integer", "string", ... as a user would say it.
  static const char* type_name(const nlohmann::json& j);

  // --- structure -----------------------------------------------------------
  bool has(const char* key) const { return j_->is_object() && j_->contains(key); }
  // Absent and null both count as not given.
  bool given(const char* key) const { return has(key) && !j_->at(key).is_null(); }
  JsonNode field(const char* key) const;  // fails "missing" when absent
  JsonNode at(std::size_t i) const;
  std::size_t size() const { return j_->size(); }
  // Unknown keys are mistakes (a typo'd "retain_grpah" would silently run the
  // wrong workload), so they are refused.
  void only(std::initializer_list<const char*> allowed) const;
  const JsonNode& expect_object() const;
  const JsonNode& expect_array() const;

  // --- this value ----------------------------------------------------------
  std::string as_string() const;
  std::int64_t as_integer(std::int64_t lo, std::int64_t hi) const;
  double as_number(double lo, double hi) const;
  bool as_bool() const;
  // A MiB figure: finite, not negative, not absurd (kAbsurdMiB).
  double as_mib() const;
  // One of a closed set, by the names its to_string() gives
  // (memdiag/enum_names.hpp); the message lists them.
  template <typename E>
  E as_enum() const {
    const std::string s = as_string();
    if (auto v = parse_enum<E>(s)) return *v;
    fail("'" + s + "' is not one of: " + enum_names<E>() + did_you_mean_enum<E>(s));
  }

  // --- fields, with or without a fallback ----------------------------------
  std::string str(const char* key) const { return field(key).as_string(); }
  std::optional<std::string> opt_str(const char* key) const;
  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    return field(key).as_integer(lo, hi);
  }
  std::optional<std::int64_t> opt_integer(const char* key, std::int64_t lo, std::int64_t hi) const;
  double number(const char* key, double fallback, double lo, double hi) const;
  bool boolean(const char* key, bool fallback) const;
  double mib(const char* key) const { return field(key).as_mib(); }
  std::optional<double> opt_mib(const char* key) const;

 private:
  JsonNode child(const nlohmann::json& j, std::string path) const { return JsonNode(j, source_, std::move(path)); }

  const nlohmann::json* j_;
  std::string source_;
  std::string path_;
};

// Reads a whole stream, refusing (InputError at "$") one longer than
// limits::kMaxInputBytes: files and standard input are read through this.
std::string read_bounded(std::istream& in, const std::string& source);

// Parses text as JSON; an InputError at "$" says why not (empty, binary,
// nested deeper than limits::kMaxJsonDepth, or the parser's position and
// token).
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

}  // namespace memdiag::detail
