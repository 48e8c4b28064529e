#include "memdiag/report_reader.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace memdiag {
using nlohmann::json;
namespace fs = std::filesystem;

std::string ReadError::to_string() const { return source + ": " + path + ": " + message; }

namespace {

struct Invalid {
  std::string path;
  std::string message;
};

const char* type_name(const json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "boolean";
  if (j.is_number_integer()) return "integer";
  if (j.is_number()) return "number";
  if (j.is_string()) return "string";
  if (j.is_array()) return "array";
  return "object";
}

// Walks one object, remembering where it is so every complaint carries a path.
class Node {
 public:
  Node(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const json& raw() const { return j_; }
  const std::string& path() const { return path_; }

  Node object_field(const char* key) const {
    Node n = field(key);
    if (!n.j_.is_object()) n.fail(std::string("expected an object, got ") + type_name(n.j_));
    return n;
  }
  Node array_field(const char* key) const {
    Node n = field(key);
    if (!n.j_.is_array()) n.fail(std::string("expected an array, got ") + type_name(n.j_));
    return n;
  }
  std::string str(const char* key) const {
    Node n = field(key);
    if (!n.j_.is_string()) n.fail(std::string("expected a string, got ") + type_name(n.j_));
    return n.j_.get<std::string>();
  }
  std::optional<std::string> opt_str(const char* key) const {
    if (!j_.contains(key) || j_.at(key).is_null()) return std::nullopt;
    return str(key);
  }
  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    Node n = field(key);
    if (!n.j_.is_number_integer()) n.fail(std::string("expected an integer, got ") + type_name(n.j_));
    const std::int64_t v = n.j_.get<std::int64_t>();
    if (v < lo || v > hi) {
      n.fail("value " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    }
    return v;
  }
  std::optional<std::int64_t> opt_integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    if (!j_.contains(key) || j_.at(key).is_null()) return std::nullopt;
    return integer(key, lo, hi);
  }
  bool boolean(const char* key, bool fallback) const {
    if (!j_.contains(key)) return fallback;
    Node n = field(key);
    if (!n.j_.is_boolean()) n.fail(std::string("expected a boolean, got ") + type_name(n.j_));
    return n.j_.get<bool>();
  }
  // A MiB figure: finite, not negative, not absurd.
  double mib(const char* key) const {
    Node n = field(key);
    return n.as_mib();
  }
  std::optional<double> opt_mib(const char* key) const {
    if (!j_.contains(key) || j_.at(key).is_null()) return std::nullopt;
    return mib(key);
  }
  double as_mib() const {
    if (!j_.is_number()) fail(std::string("expected a number, got ") + type_name(j_));
    const double v = j_.get<double>();
    if (!std::isfinite(v)) fail("not a finite number");
    if (v < 0) fail("negative MiB (" + std::to_string(v) + ")");
    if (v > kAbsurdMiB) fail("absurd MiB figure (" + std::to_string(v) + "), larger than 1 PiB");
    return v;
  }
  double non_negative(const char* key) const {
    Node n = field(key);
    if (!n.j_.is_number()) n.fail(std::string("expected a number, got ") + type_name(n.j_));
    const double v = n.j_.get<double>();
    if (!std::isfinite(v) || v < 0) n.fail("expected a finite non-negative number");
    return v;
  }
  Node at(std::size_t i) const { return Node(j_.at(i), path_ + "[" + std::to_string(i) + "]"); }
  std::size_t size() const { return j_.size(); }

  [[noreturn]] void fail(const std::string& message) const { throw Invalid{path_, message}; }

 private:
  Node field(const char* key) const {
    if (!j_.contains(key)) throw Invalid{path_ + "." + key, "missing"};
    return Node(j_.at(key), path_ + "." + key);
  }

  const json& j_;
  std::string path_;
};

constexpr std::int64_t kMaxInt = std::int64_t{1} << 53;

Sample read_sample(const Node& n) {
  if (!n.raw().is_object()) n.fail(std::string("expected an object, got ") + type_name(n.raw()));
  Sample s;
  s.phase = n.str("phase");
  if (s.phase.empty()) n.fail("empty phase name");
  if (auto st = n.opt_integer("step", 0, 10'000'000)) s.step = static_cast<int>(*st);
  s.allocated_mib = n.mib("allocated_mib");
  s.reserved_mib = n.opt_mib("reserved_mib");
  s.device_used_mib = n.opt_mib("device_used_mib");
  s.peak_allocated_mib = n.mib("peak_allocated_mib");
  s.inactive_split_mib = n.opt_mib("inactive_split_mib");
  s.process_device_mib = n.opt_mib("process_device_mib");
  s.elapsed_ms = n.non_negative("elapsed_ms");
  if (n.raw().contains("tensors") && !n.raw().at("tensors").is_null()) {
    Node t = n.object_field("tensors");
    s.tensors = TensorCensus{t.mib("parameters_mib"), t.mib("gradients_mib"),
                             t.mib("optimizer_state_mib")};
  }
  return s;
}

Report read(const json& doc) {
  Node root(doc, "$");
  if (!doc.is_object()) root.fail(std::string("expected a report object, got ") + type_name(doc));
  if (!doc.contains("schema_version")) {
    throw Invalid{"$.schema_version", "missing; not a memdiag report"};
  }
  const std::int64_t version = root.integer("schema_version", 0, kMaxInt);
  if (version > kSchemaVersion) {
    throw Invalid{"$.schema_version", "version " + std::to_string(version) +
                                          " is newer than this tool reads (" +
                                          std::to_string(kSchemaVersion) + "); upgrade memdiag"};
  }
  if (version < kSchemaVersion) {
    throw Invalid{"$.schema_version", "version " + std::to_string(version) +
                                          " is older than this tool reads (" +
                                          std::to_string(kSchemaVersion) + "); re-run the workload"};
  }

  Report r;
  Node jcase = root.object_field("case");
  r.case_name = jcase.str("name");
  if (r.case_name.empty()) jcase.fail("empty case name");
  r.case_description = jcase.opt_str("description").value_or("");
  r.case_spec = jcase.raw();

  Node c = root.object_field("config");
  r.config.batch_size_per_device = static_cast<int>(c.integer("batch_size_per_device", 1, 1 << 30));
  r.config.preset = c.str("preset");
  r.config.steps = static_cast<int>(c.integer("steps", 0, 10'000'000));
  r.config.device = c.str("device");
  r.config.seed = static_cast<std::uint64_t>(c.integer("seed", 0, kMaxInt));
  r.config.memory_limit_mib = c.opt_mib("memory_limit_mib");
  r.config.world_size = static_cast<int>(c.opt_integer("world_size", 1, 1 << 20).value_or(1));
  r.config.rank = static_cast<int>(c.opt_integer("rank", 0, r.config.world_size - 1).value_or(0));
  r.config.local_rank = static_cast<int>(c.opt_integer("local_rank", 0, 1 << 20).value_or(0));
  r.config.backend = c.opt_str("backend").value_or("none");
  r.config.rank_zero_extra_samples =
      static_cast<int>(c.opt_integer("rank_zero_extra_samples", 0, 1 << 30).value_or(0));
  r.config.shard_optimizer_state = c.boolean("shard_optimizer_state", false);

  Node m = root.object_field("model");
  r.model.parameters = m.integer("parameters", 0, kMaxInt);
  r.model.parameter_bytes = m.integer("parameter_bytes", 0, kMaxInt);

  Node e = root.object_field("environment");
  r.environment.device_name = e.str("device_name");
  r.environment.device_total_mib = e.opt_mib("device_total_mib");
  r.environment.torch_version = e.str("torch_version");
  r.environment.cuda_runtime_version = e.opt_str("cuda_runtime_version");
  r.environment.driver_version = e.opt_str("driver_version");
  r.environment.host = e.str("host");
  r.environment.start_time = e.str("start_time");
  r.environment.memdiag_version = e.opt_str("memdiag_version").value_or("");

  Node samples = root.array_field("samples");
  int last_step = -1;
  bool seen_step = false;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    Node sn = samples.at(i);
    Sample s = read_sample(sn);
    if (s.step) {
      if (*s.step < last_step) {
        throw Invalid{sn.path() + ".step", "steps out of order (" + std::to_string(*s.step) +
                                               " after " + std::to_string(last_step) + ")"};
      }
      last_step = *s.step;
      seen_step = true;
    } else if (seen_step) {
      throw Invalid{sn.path() + ".step", "setup phase '" + s.phase + "' after step samples"};
    }
    if (s.peak_allocated_mib + 1e-6 < s.allocated_mib) {
      throw Invalid{sn.path() + ".peak_allocated_mib", "peak is below allocated"};
    }
    r.samples.push_back(std::move(s));
  }

  Node events = root.array_field("events");
  for (std::size_t i = 0; i < events.size(); ++i) {
    Node en = events.at(i);
    if (!en.raw().is_object()) en.fail("expected an object");
    Event ev;
    ev.kind = en.str("kind");
    ev.phase = en.opt_str("phase").value_or("");
    if (auto st = en.opt_integer("step", 0, 10'000'000)) ev.step = static_cast<int>(*st);
    ev.message = en.opt_str("message").value_or("");
    ev.mib = en.opt_mib("mib");
    r.events.push_back(std::move(ev));
  }

  const std::string status = root.str("status");
  auto st = run_status_from_string(status);
  if (!st) throw Invalid{"$.status", "unknown status '" + status + "'"};
  r.status = *st;
  return r;
}

}  // namespace

ReadResult parse_report(const json& doc, const std::string& source) {
  try {
    return {read(doc), std::nullopt};
  } catch (const Invalid& inv) {
    return {std::nullopt, ReadError{source, inv.path, inv.message}};
  } catch (const json::exception& ex) {
    return {std::nullopt, ReadError{source, "$", ex.what()}};
  }
}

ReadResult parse_report_text(const std::string& text, const std::string& source) {
  if (text.empty()) return {std::nullopt, ReadError{source, "$", "empty file"}};
  if (text.find('\0') != std::string::npos) {
    return {std::nullopt, ReadError{source, "$", "binary data, not JSON"}};
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Re-parse for the position; nlohmann's message names byte and token.
    try {
      const json again = json::parse(text);
      (void)again;
    } catch (const json::parse_error& ex) {
      std::string what = ex.what();
      const auto at = what.find("parse error");
      return {std::nullopt, ReadError{source, "$", "not valid JSON (" +
                                                        (at == std::string::npos ? what : what.substr(at)) + ")"}};
    }
    return {std::nullopt, ReadError{source, "$", "not valid JSON"}};
  }
  return parse_report(doc, source);
}

ReadResult read_report_file(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return {std::nullopt, ReadError{path, "$", "is a directory"}};
    std::ifstream in(path, std::ios::binary);
    if (!in) return {std::nullopt, ReadError{path, "$", "cannot open"}};
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  ReadResult r = parse_report_text(text, path);
  r.content_hash = std::hash<std::string>{}(text);
  return r;
}

InputList expand_inputs(const std::vector<std::string>& args) {
  InputList out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (a != "-" && fs::is_directory(a, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(a, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == ".json") {
          found.push_back(entry.path().string());
        }
      }
      if (ec) {
        out.errors.push_back({a, "$", "cannot list directory (" + ec.message() + ")"});
        continue;
      }
      if (found.empty()) {
        out.errors.push_back({a, "$", "directory holds no *.json reports"});
        continue;
      }
      std::sort(found.begin(), found.end());
      out.files.insert(out.files.end(), found.begin(), found.end());
    } else {
      out.files.push_back(a);
    }
  }
  return out;
}

}  // namespace memdiag
