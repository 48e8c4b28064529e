#include "memdiag/case_spec.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace memdiag {
using nlohmann::json;
namespace fs = std::filesystem;

const PresetSpec& CaseSpec::preset(const std::string& p) const {
  auto it = presets.find(p);
  if (it == presets.end()) {
    std::string known;
    for (const auto& kv : presets) known += (known.empty() ? "" : ", ") + kv.first;
    throw CaseError(source + ": presets: no preset '" + p + "' (has: " + known + ")");
  }
  return it->second;
}

namespace {

class Fields {
 public:
  Fields(const json& j, std::string source, std::string path)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", "expected an object");
  }

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    std::string where = path_;
    if (!key.empty()) where += (where.empty() ? "" : ".") + key;
    throw CaseError(source_ + ": " + (where.empty() ? "(top level)" : where) + ": " + why);
  }

  // Unknown keys are mistakes (a typo'd "retain_grpah" would silently run the
  // wrong workload), so they are refused.
  void only(std::initializer_list<const char*> allowed) const {
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!ok.count(it.key())) fail(it.key(), "unknown field");
    }
  }

  bool has(const char* key) const { return j_.contains(key); }

  std::string str(const char* key, std::optional<std::string> fallback = std::nullopt) const {
    if (!j_.contains(key)) {
      if (fallback) return *fallback;
      fail(key, "missing");
    }
    if (!j_.at(key).is_string()) fail(key, "expected a string");
    return j_.at(key).get<std::string>();
  }
  int positive_int(const char* key, std::optional<int> fallback = std::nullopt) const {
    if (!j_.contains(key)) {
      if (fallback) return *fallback;
      fail(key, "missing");
    }
    const json& v = j_.at(key);
    if (!v.is_number_integer()) fail(key, "expected a positive integer");
    const auto x = v.get<std::int64_t>();
    if (x < 1 || x > (1 << 30)) fail(key, "expected a positive integer, got " + std::to_string(x));
    return static_cast<int>(x);
  }
  double number(const char* key, double fallback, double lo, double hi) const {
    if (!j_.contains(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number()) fail(key, "expected a number");
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) {
      std::ostringstream os;
      os << "value " << x << " is out of range [" << lo << ", " << hi << "]";
      fail(key, os.str());
    }
    return x;
  }
  bool boolean(const char* key, bool fallback) const {
    if (!j_.contains(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(key, "expected true or false");
    return j_.at(key).get<bool>();
  }
  Fields sub(const char* key) const {
    if (!j_.contains(key)) fail(key, "missing");
    return Fields(j_.at(key), source_, path_.empty() ? key : path_ + "." + key);
  }
  const json& raw() const { return j_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string source_;
  std::string path_;
};

std::string one_of(const Fields& f, const char* key, const std::string& fallback,
                   std::initializer_list<const char*> allowed) {
  const std::string v = f.str(key, fallback);
  for (const char* a : allowed) {
    if (v == a) return v;
  }
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  f.fail(key, "'" + v + "' is not one of: " + list);
}

ModelSpec parse_model(const Fields& f) {
  f.only({"input_dim", "hidden_dim", "depth", "output_dim", "activation", "dtype"});
  ModelSpec m;
  m.input_dim = f.positive_int("input_dim");
  m.hidden_dim = f.positive_int("hidden_dim");
  m.depth = f.positive_int("depth");
  m.output_dim = f.positive_int("output_dim");
  m.activation = one_of(f, "activation", "relu", {"relu", "gelu", "tanh"});
  m.dtype = one_of(f, "dtype", "float32", {"float32", "bfloat16"});
  return m;
}

}  // namespace

CaseSpec parse_case(const json& doc, const std::string& source) {
  Fields root(doc, source, "");
  root.only({"name", "description", "optimizer", "graph", "default_preset", "presets", "$comment"});
  CaseSpec c;
  c.source = source;
  c.name = root.str("name");
  if (c.name.empty()) root.fail("name", "must not be empty");
  c.description = root.str("description", std::string());

  Fields o = root.sub("optimizer");
  o.only({"type", "lr", "momentum", "weight_decay", "beta1", "beta2", "eps"});
  c.optimizer.type = one_of(o, "type", "", {"sgd", "adam", "adamw"});
  c.optimizer.lr = o.number("lr", 1e-3, 0.0, 10.0);
  c.optimizer.momentum = o.number("momentum", 0.0, 0.0, 1.0);
  c.optimizer.weight_decay = o.number("weight_decay", c.optimizer.type == "adamw" ? 1e-2 : 0.0, 0.0, 1.0);
  c.optimizer.beta1 = o.number("beta1", 0.9, 0.0, 1.0);
  c.optimizer.beta2 = o.number("beta2", 0.999, 0.0, 1.0);
  c.optimizer.eps = o.number("eps", 1e-8, 0.0, 1.0);

  if (root.has("graph")) {
    Fields g = root.sub("graph");
    g.only({"retain_graph", "keep_graph_connected_loss"});
    c.graph.retain_graph = g.boolean("retain_graph", false);
    c.graph.keep_graph_connected_loss = g.boolean("keep_graph_connected_loss", false);
  }

  Fields presets = root.sub("presets");
  if (presets.raw().empty()) presets.fail("", "needs at least one preset");
  for (auto it = presets.raw().begin(); it != presets.raw().end(); ++it) {
    const std::string key = it.key();
    Fields p(it.value(), source, "presets." + key);
    p.only({"model", "batch_size", "steps", "$comment"});
    PresetSpec ps;
    ps.model = parse_model(p.sub("model"));
    ps.batch_size = p.positive_int("batch_size");
    ps.steps = p.positive_int("steps");
    c.presets[key] = ps;
  }
  c.default_preset = root.str("default_preset", std::string("small"));
  if (!c.presets.count(c.default_preset)) {
    root.fail("default_preset", "names no preset ('" + c.default_preset + "')");
  }
  return c;
}

CaseSpec load_case_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw CaseError(path + ": no such case file");
  std::ifstream in(path);
  if (!in) throw CaseError(path + ": cannot open");
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw CaseError(path + ": not valid JSON");
  return parse_case(doc, path);
}

CaseSpec resolve_case(const std::string& arg, const std::vector<std::string>& dirs) {
  const bool looks_like_path =
      arg.find('/') != std::string::npos ||
      (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".json") == 0);
  if (looks_like_path) return load_case_file(arg);
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / (arg + ".json");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return load_case_file(p.string());
  }
  std::string known;
  for (const CaseSpec& c : list_cases(dirs)) known += (known.empty() ? "" : ", ") + c.name;
  throw CaseError("unknown case '" + arg + "' (built-in: " + (known.empty() ? "none found" : known) +
                  "; or pass a path to a case file)");
}

std::vector<CaseSpec> list_cases(const std::vector<std::string>& dirs) {
  std::vector<CaseSpec> out;
  std::set<std::string> seen;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::string stem = f.stem().string();
      if (seen.count(stem)) continue;
      seen.insert(stem);
      out.push_back(load_case_file(f.string()));
    }
  }
  return out;
}

json resolved_case_json(const CaseSpec& c, const std::string& preset) {
  const PresetSpec& p = c.preset(preset);
  const OptimizerSpec& o = c.optimizer;
  json opt = {{"type", o.type}, {"lr", o.lr}, {"weight_decay", o.weight_decay}};
  if (o.type == "sgd") {
    opt["momentum"] = o.momentum;
  } else {
    opt["beta1"] = o.beta1;
    opt["beta2"] = o.beta2;
    opt["eps"] = o.eps;
  }
  return json{
      {"name", c.name},
      {"description", c.description},
      {"source", c.source},
      {"optimizer", opt},
      {"graph",
       {{"retain_graph", c.graph.retain_graph},
        {"keep_graph_connected_loss", c.graph.keep_graph_connected_loss}}},
      {"model",
       {{"input_dim", p.model.input_dim},
        {"hidden_dim", p.model.hidden_dim},
        {"depth", p.model.depth},
        {"output_dim", p.model.output_dim},
        {"activation", p.model.activation},
        {"dtype", p.model.dtype}}},
  };
}

}  // namespace memdiag
