#include "memdiag/case_spec.hpp"

#include "memdiag/json_reader.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/suggest.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>
#include <sstream>

namespace memdiag {
using detail::JsonNode;
using nlohmann::json;
namespace fs = std::filesystem;

const char* to_string(Activation a) {
  switch (a) {
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kTanh: return "tanh";
  }
  return nullptr;  // past the last value: all_values() stops here
}
const char* to_string(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
  }
  return nullptr;  // past the last value: all_values() stops here
}
const char* to_string(OptimizerType o) {
  switch (o) {
    case OptimizerType::kSgd: return "sgd";
    case OptimizerType::kAdam: return "adam";
    case OptimizerType::kAdamW: return "adamw";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const char* to_string(ModelKind k) {
  switch (k) {
    case ModelKind::kMlp: return "mlp";
    case ModelKind::kTransformer: return "transformer";
  }
  return nullptr;  // past the last value: all_values() stops here
}
const char* to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kMath: return "math";
    case AttentionKernel::kSdpa: return "sdpa";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const PresetSpec& CaseSpec::preset(const std::string& p) const {
  auto it = presets.find(p);
  if (it == presets.end()) {
    std::string known;
    std::vector<std::string> names;
    for (const auto& kv : presets) {
      known += (known.empty() ? "" : ", ") + kv.first;
      names.push_back(kv.first);
    }
    throw UsageError("--preset: case " + name + " has no preset '" + p + "'" + did_you_mean(p, names) + " (has: " +
                     known + ")");
  }
  return it->second;
}

std::int64_t CaseSpec::batch_samples(std::int64_t batch, int step) const {
  if (batch_schedule.empty()) return batch;
  const double f = batch_schedule[static_cast<std::size_t>(step) % batch_schedule.size()];
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(batch) * f));
}

std::int64_t CaseSpec::min_batch_samples(std::int64_t batch) const {
  std::int64_t least = batch;
  for (std::size_t i = 0; i < batch_schedule.size(); ++i) least = std::min(least, batch_samples(batch, static_cast<int>(i)));
  return batch_schedule.empty() ? batch : least;
}

namespace {

int dimension(const JsonNode& n, const char* key) {
  return static_cast<int>(n.integer(key, 1, limits::kMaxDimension));
}

ModelSpec parse_transformer(const JsonNode& m) {
  m.only({"type", "vocab", "sequence_length", "width", "heads", "layers", "ffn_width", "dropout", "tied_embeddings",
          "attention", "dtype"});
  ModelSpec s;
  s.kind = ModelKind::kTransformer;
  s.vocab = dimension(m, "vocab");
  s.sequence_length = static_cast<int>(m.integer("sequence_length", 1, limits::kMaxSequenceLength));
  s.width = dimension(m, "width");
  s.heads = static_cast<int>(m.integer("heads", 1, limits::kMaxDepth));
  if (s.width % s.heads != 0) m.field("heads").fail("must divide width (" + std::to_string(s.width) + ")");
  s.layers = static_cast<int>(m.integer("layers", 1, limits::kMaxDepth));
  s.ffn_width = m.given("ffn_width") ? dimension(m, "ffn_width") : 4 * s.width;
  s.dropout = m.number("dropout", 0.0, 0.0, 0.99);
  s.tied_embeddings = m.boolean("tied_embeddings", true);
  if (m.given("attention")) s.attention = m.field("attention").as_enum<AttentionKernel>();
  if (m.given("dtype")) s.dtype = m.field("dtype").as_enum<DType>();
  // Embeddings, positions, per block two norms, qkv, proj and the
  // feed-forward, a final norm and (untied) the head: refused before
  // anything is built, as for the MLP.
  const long double w = s.width, f = s.ffn_width;
  const long double block = 4 * w + (3 * w * w + 3 * w) + (w * w + w) + (w * f + f) + (f * w + w);
  const long double params = static_cast<long double>(s.vocab) * w + static_cast<long double>(s.sequence_length) * w +
                             s.layers * block + 2 * w + (s.tied_embeddings ? 0 : static_cast<long double>(s.vocab) * w);
  if (params > static_cast<long double>(limits::kMaxParameters)) {
    m.fail("the model would have " + std::to_string(static_cast<double>(params)) + " parameters; memdiag builds at most " +
           std::to_string(limits::kMaxParameters));
  }
  return s;
}

ModelSpec parse_model(const JsonNode& m) {
  if (m.given("type")) {
    const ModelKind kind = m.field("type").as_enum<ModelKind>();
    if (kind == ModelKind::kTransformer) return parse_transformer(m);
  }
  m.only({"type", "input_dim", "hidden_dim", "depth", "output_dim", "activation", "dtype"});
  ModelSpec s;
  s.input_dim = dimension(m, "input_dim");
  s.hidden_dim = dimension(m, "hidden_dim");
  s.depth = static_cast<int>(m.integer("depth", 1, limits::kMaxDepth));
  s.output_dim = dimension(m, "output_dim");
  // Refused before anything is built: building a model allocates host
  // memory for its modules and weights that no memory limit counts, and
  // cannot be interrupted (a depth of 1e9 ran the host out of memory).
  const long double params = static_cast<long double>(s.input_dim) * s.hidden_dim + s.hidden_dim +
                             static_cast<long double>(s.depth - 1) * (static_cast<long double>(s.hidden_dim) * s.hidden_dim + s.hidden_dim) +
                             static_cast<long double>(s.hidden_dim) * s.output_dim + s.output_dim;
  if (params > static_cast<long double>(limits::kMaxParameters)) {
    m.fail("the model would have " + std::to_string(static_cast<double>(params)) + " parameters; memdiag builds at most " +
           std::to_string(limits::kMaxParameters) + " (256 GiB in float32, beyond any one device)");
  }
  if (m.given("activation")) {
    s.activation = m.field("activation").as_enum<Activation>();
  }
  if (m.given("dtype")) s.dtype = m.field("dtype").as_enum<DType>();
  return s;
}

// The settings each kind of optimizer takes besides its type, in the order
// a message names them.
std::vector<std::string> settings_of(OptimizerType t) {
  switch (t) {
    case OptimizerType::kSgd:
      return {"lr", "momentum", "weight_decay"};
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW:
      return {"lr", "beta1", "beta2", "eps", "weight_decay"};
  }
  return {};
}

OptimizerSpec parse_optimizer(const JsonNode& o) {
  o.only({"type", "lr", "momentum", "weight_decay", "beta1", "beta2", "eps"});
  OptimizerSpec s;
  s.type = o.field("type").as_enum<OptimizerType>();
  // A field of another kind of optimizer would be read and never used
  // (momentum under adam): refused, naming what this type takes.
  const std::vector<std::string> takes = settings_of(s.type);
  for (OptimizerType other : {OptimizerType::kSgd, OptimizerType::kAdam, OptimizerType::kAdamW}) {
    for (const std::string& f : settings_of(other)) {
      if (!o.given(f.c_str()) || std::find(takes.begin(), takes.end(), f) != takes.end()) continue;
      std::string list;
      for (const std::string& t : takes) list += (list.empty() ? "" : ", ") + t;
      o.field(f.c_str()).fail(std::string("not a setting of ") + to_string(s.type) + " (it takes " + list + ")");
    }
  }
  s.lr = o.number("lr", s.lr, 0.0, 10.0);
  s.momentum = o.number("momentum", s.momentum, 0.0, 1.0);
  // AdamW's usual default; the others default to none.
  s.weight_decay = o.number("weight_decay", s.type == OptimizerType::kAdamW ? 1e-2 : 0.0, 0.0, 1.0);
  s.beta1 = o.number("beta1", s.beta1, 0.0, 1.0);
  s.beta2 = o.number("beta2", s.beta2, 0.0, 1.0);
  s.eps = o.number("eps", s.eps, 0.0, 1.0);
  return s;
}

CaseSpec parse_case(const JsonNode& root) {
  root.expect_object();
  root.only({"name", "description", "optimizer", "graph", "batch_schedule", "default_preset", "presets", "$comment"});
  CaseSpec c;
  c.source = root.source();
  c.name = root.str("name");
  if (c.name.empty()) root.field("name").fail("must not be empty");
  c.description = root.opt_str("description").value_or("");
  c.optimizer = parse_optimizer(root.field("optimizer"));
  if (root.given("graph")) {
    const JsonNode g = root.field("graph");
    g.only({"retain_graph", "keep_graph_connected_loss"});
    c.graph.retain_graph = g.boolean("retain_graph", false);
    c.graph.keep_graph_connected_loss = g.boolean("keep_graph_connected_loss", false);
  }
  if (root.given("batch_schedule")) {
    const JsonNode b = root.field("batch_schedule");
    b.expect_array();
    if (b.size() == 0 || b.size() > limits::kMaxScheduleLength) {
      b.fail("needs 1 to " + std::to_string(limits::kMaxScheduleLength) + " entries, fractions of the batch per step");
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      // Up to 4x the batch: a schedule that varies the batch around the
      // preset's, not one that replaces it (the limits on the batch hold).
      const double f = b.at(i).as_number(0.0, 4.0);
      if (!(f > 0)) b.at(i).fail("must be greater than 0");
      c.batch_schedule.push_back(f);
    }
  }
  const JsonNode presets = root.field("presets");
  presets.expect_object();
  if (presets.size() == 0) presets.fail("needs at least one preset");
  for (auto it = presets.raw().begin(); it != presets.raw().end(); ++it) {
    const JsonNode p = presets.field(it.key().c_str());
    p.only({"model", "batch_size", "steps", "$comment"});
    PresetSpec ps;
    ps.model = parse_model(p.field("model"));
    ps.batch_size = static_cast<int>(p.integer("batch_size", 1, limits::kMaxBatch));
    ps.steps = static_cast<int>(p.integer("steps", 1, limits::kMaxSteps));
    c.presets[it.key()] = ps;
  }
  c.default_preset = root.opt_str("default_preset").value_or("small");
  if (!c.presets.count(c.default_preset)) {
    root.field("default_preset").fail("names no preset ('" + c.default_preset + "')");
  }
  return c;
}

}  // namespace

CaseSpec parse_case_text(const std::string& text, const std::string& source) {
  const json doc = detail::parse_json_text(text, source);
  return parse_case(JsonNode(doc, source));
}

CaseSpec load_case_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw InputError(path, "", "no such case file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", std::string("cannot open (") + std::strerror(errno) + ")");
  return parse_case_text(detail::read_bounded(in, path), path);
}

CaseSpec resolve_case(const std::string& arg, const std::vector<std::string>& dirs) {
  const bool looks_like_path =
      arg.find('/') != std::string::npos || (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".json") == 0);
  if (looks_like_path) {
    // Absolute, so a report names a file that a later command finds from
    // any directory.
    std::error_code ec;
    const fs::path abs = fs::absolute(arg, ec);
    CaseSpec c = load_case_file(ec ? arg : abs.lexically_normal().string());
    c.builtin = false;
    return c;
  }
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / (arg + ".json");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      CaseSpec c = load_case_file(p.string());
      c.builtin = true;
      return c;
    }
  }
  std::string known;
  for (const CaseSpec& c : list_cases(dirs)) known += (known.empty() ? "" : ", ") + c.name;
  throw UsageError("--case: unknown case '" + arg + "' (built-in: " + (known.empty() ? "none found" : known) +
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
      if (!seen.insert(stem).second) continue;
      CaseSpec c = load_case_file(f.string());
      c.builtin = true;
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::int64_t parameter_count(const ModelSpec& m) {
  auto linear = [](std::int64_t in, std::int64_t out, bool bias) { return in * out + (bias ? out : 0); };
  if (m.kind == ModelKind::kTransformer) {
    const std::int64_t d = m.width, f = m.ffn_width, v = m.vocab;
    // norm1, qkv, proj, norm2, up, down.
    const std::int64_t block = 2 * d + linear(d, 3 * d, true) + linear(d, d, true) + 2 * d + linear(d, f, true) +
                               linear(f, d, true);
    return v * d + static_cast<std::int64_t>(m.sequence_length) * d + m.layers * block + 2 * d +
           (m.tied_embeddings ? 0 : linear(d, v, false));
  }
  std::int64_t n = 0, width = m.input_dim;
  for (int i = 0; i < m.depth; ++i) {
    n += linear(width, m.hidden_dim, true);
    width = m.hidden_dim;
  }
  return n + linear(width, m.output_dim, true);
}

std::string resolved_case_detail(const CaseSpec& c, const std::string& preset, const std::string& probe) {
  const PresetSpec& p = c.preset(preset);
  const OptimizerSpec& o = c.optimizer;
  json opt = {{"type", to_string(o.type)}, {"lr", o.lr}, {"weight_decay", o.weight_decay}};
  if (o.type == OptimizerType::kSgd) {
    opt["momentum"] = o.momentum;
  } else {
    opt["beta1"] = o.beta1;
    opt["beta2"] = o.beta2;
    opt["eps"] = o.eps;
  }
  const ModelSpec& m = p.model;
  json model = m.kind == ModelKind::kTransformer
                   ? json{{"type", to_string(m.kind)},
                          {"vocab", m.vocab},
                          {"sequence_length", m.sequence_length},
                          {"width", m.width},
                          {"heads", m.heads},
                          {"layers", m.layers},
                          {"ffn_width", m.ffn_width},
                          {"dropout", m.dropout},
                          {"tied_embeddings", m.tied_embeddings},
                          {"attention", to_string(m.attention)},
                          {"dtype", to_string(m.dtype)}}
                   : json{{"input_dim", m.input_dim},
                          {"hidden_dim", m.hidden_dim},
                          {"depth", m.depth},
                          {"output_dim", m.output_dim},
                          {"activation", to_string(m.activation)},
                          {"dtype", to_string(m.dtype)}};
  json detail{
      {"probe", probe},
      {"optimizer", opt},
      {"graph",
       {{"retain_graph", c.graph.retain_graph}, {"keep_graph_connected_loss", c.graph.keep_graph_connected_loss}}},
      {"model", model},
  };
  if (!c.batch_schedule.empty()) detail["batch_schedule"] = c.batch_schedule;
  return detail.dump();
}

}  // namespace memdiag
