#include "memdiag/json_reader.hpp"
#include "memdiag/format.hpp"
#include "memdiag/suggest.hpp"

#include "memdiag/limits.hpp"

#include <vector>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <istream>
#include <set>
#include <sstream>

namespace memdiag::detail {
using nlohmann::json;

namespace {

// A key that is a plain identifier reads as .key, anything else as ["key"].
std::string child_path(const std::string& parent, const std::string& key) {
  bool plain = !key.empty();
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '$';
    plain = plain && ok;
  }
  if (plain) return parent + "." + key;
  return parent + "[" + json(key).dump() + "]";
}

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

void JsonNode::fail(const std::string& message) const { throw InputError(source_, path_, message); }

const char* JsonNode::type_name(const json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "boolean";
  if (j.is_number_integer()) return "integer";
  if (j.is_number()) return "number";
  if (j.is_string()) return "string";
  if (j.is_array()) return "array";
  return "object";
}

JsonNode JsonNode::field(const char* key) const {
  expect_object();
  const std::string p = child_path(path_, key);
  if (!j_->contains(key)) throw InputError(source_, p, "missing");
  return child(j_->at(key), p);
}

JsonNode JsonNode::at(std::size_t i) const { return child(j_->at(i), path_ + "[" + std::to_string(i) + "]"); }

void JsonNode::only(std::initializer_list<const char*> allowed) const {
  expect_object();
  const std::set<std::string> ok(allowed.begin(), allowed.end());
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (ok.count(it.key())) continue;
    // What was meant, and what this object takes ($comment, a note, left unsaid).
    std::vector<std::string> names;
    for (const char* a : allowed) {
      if (std::string(a) != "$comment") names.emplace_back(a);
    }
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    throw InputError(source_, child_path(path_, it.key()),
                     "unknown field" + did_you_mean(it.key(), names) + "; the fields here: " + list);
  }
}

const JsonNode& JsonNode::expect_object() const {
  if (!j_->is_object()) fail(std::string("expected an object, got ") + type_name(*j_));
  return *this;
}

const JsonNode& JsonNode::expect_array() const {
  if (!j_->is_array()) fail(std::string("expected an array, got ") + type_name(*j_));
  return *this;
}

std::string JsonNode::as_string() const {
  if (!j_->is_string()) fail(std::string("expected a string, got ") + type_name(*j_));
  // Every string memdiag reads from a file ends up printed somewhere: control
  // characters are replaced here, once, rather than in each output.
  return printable(j_->get<std::string>());
}

std::int64_t JsonNode::as_integer(std::int64_t lo, std::int64_t hi) const {
  if (!j_->is_number_integer()) fail(std::string("expected an integer, got ") + type_name(*j_));
  // An unsigned value above int64's range would wrap in get<int64_t>().
  if (j_->is_number_unsigned() && j_->get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    fail("value " + std::to_string(j_->get<std::uint64_t>()) + " is out of range [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]");
  }
  const std::int64_t v = j_->get<std::int64_t>();
  if (v < lo || v > hi) {
    fail("value " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

double JsonNode::as_number(double lo, double hi) const {
  if (!j_->is_number()) fail(std::string("expected a number, got ") + type_name(*j_));
  const double v = j_->get<double>();
  if (!std::isfinite(v)) fail("not a finite number");
  if (!(v >= lo && v <= hi)) {
    fail("value " + number_text(v) + " is out of range [" + number_text(lo) + ", " + number_text(hi) + "]");
  }
  return v;
}

bool JsonNode::as_bool() const {
  if (!j_->is_boolean()) fail(std::string("expected true or false, got ") + type_name(*j_));
  return j_->get<bool>();
}

double JsonNode::as_mib() const {
  if (!j_->is_number()) fail(std::string("expected a number, got ") + type_name(*j_));
  const double v = j_->get<double>();
  if (!std::isfinite(v)) fail("not a finite number");
  if (v < 0) fail("negative MiB (" + number_text(v) + ")");
  if (v > limits::kAbsurdMiB) fail("absurd MiB figure (" + number_text(v) + "), larger than 1 PiB");
  return v;
}

std::optional<std::string> JsonNode::opt_str(const char* key) const {
  if (!given(key)) return std::nullopt;
  return str(key);
}

std::optional<std::int64_t> JsonNode::opt_integer(const char* key, std::int64_t lo, std::int64_t hi) const {
  if (!given(key)) return std::nullopt;
  return integer(key, lo, hi);
}

double JsonNode::number(const char* key, double fallback, double lo, double hi) const {
  if (!given(key)) return fallback;
  return field(key).as_number(lo, hi);
}

bool JsonNode::boolean(const char* key, bool fallback) const {
  if (!given(key)) return fallback;
  return field(key).as_bool();
}

std::optional<double> JsonNode::opt_mib(const char* key) const {
  if (!given(key)) return std::nullopt;
  return mib(key);
}

namespace {

// The deepest nesting of arrays and objects, brackets inside strings aside;
// stops counting at the limit. A scan rather than a parser callback: it
// costs one pass over bytes already in memory.
int nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}') --depth;
    if (deepest > limits::kMaxJsonDepth) break;
  }
  return deepest;
}

}  // namespace

std::string read_bounded(std::istream& in, const std::string& source) {
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::int64_t>(text.size()) > limits::kMaxInputBytes) {
      throw InputError(source, "$", "larger than " + std::to_string(limits::kMaxInputBytes >> 20) +
                                        " MiB; not a memdiag file (an endless stream such as /dev/zero?)");
    }
  }
  if (in.bad()) throw InputError(source, "$", std::string("cannot read (") + std::strerror(errno) + ")");
  return text;
}

json parse_json_text(const std::string& text, const std::string& source) {
  if (text.empty()) throw InputError(source, "$", "empty file");
  if (text.find('\0') != std::string::npos) throw InputError(source, "$", "binary data, not JSON");
  if (nesting_depth(text) > limits::kMaxJsonDepth) {
    throw InputError(source, "$", "nested deeper than " + std::to_string(limits::kMaxJsonDepth) + " levels; not a memdiag file");
  }
  // A key given twice in one object would silently take its last value (a
  // plan with "steps" twice, a report with two "status"): refused, naming
  // the key's path. The callback sees keys before nlohmann merges them.
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    long index = -1;
  };
  std::vector<Frame> frames;
  auto path_of = [&frames]() {
    std::string p = "$";
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
      p += frames[i].object ? "." + frames[i].key : "[" + std::to_string(frames[i].index) + "]";
    }
    return p;
  };
  std::optional<InputError> duplicate;
  const json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    const bool element_start = event == json::parse_event_t::object_start ||
                               event == json::parse_event_t::array_start || event == json::parse_event_t::value;
    if (element_start && !frames.empty() && !frames.back().object) ++frames.back().index;
    switch (event) {
      case json::parse_event_t::object_start: frames.push_back(Frame{true, {}, {}, -1}); break;
      case json::parse_event_t::array_start: frames.push_back(Frame{false, {}, {}, -1}); break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = frames.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second && !duplicate) {
          frames.push_back(Frame{});  // so path_of names the object holding the key
          duplicate = InputError(source, path_of(), "key \"" + f.key + "\" given twice (which one is meant?)");
          frames.pop_back();
        }
        break;
      }
      case json::parse_event_t::value: break;
    }
    return true;
  };
  try {
    json j = json::parse(text, cb);
    if (duplicate) throw *duplicate;
    return j;
  } catch (const json::parse_error& ex) {
    // nlohmann's message names the byte and the token after "parse error".
    const std::string what = ex.what();
    const auto at = what.find("parse error");
    throw InputError(source, "$", "not valid JSON (" + (at == std::string::npos ? what : what.substr(at)) + ")");
  } catch (const json::exception& ex) {
    throw InputError(source, "$", std::string("not valid JSON (") + ex.what() + ")");
  }
}

}  // namespace memdiag::detail
