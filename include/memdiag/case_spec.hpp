// Case files: a workload described as data (cases/*.json), so a user can add a
// case without recompiling. Parsing is strict and names the file and field.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace memdiag {

struct ModelSpec {
  int input_dim = 0;
  int hidden_dim = 0;
  int depth = 0;  // hidden Linear+activation blocks
  int output_dim = 0;
  std::string activation = "relu";  // relu | gelu | tanh
  std::string dtype = "float32";    // float32 | bfloat16
};

struct OptimizerSpec {
  std::string type = "sgd";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.0;      // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9;         // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
};

// How long each step's autograd graph lives. Both true is the classic leak:
// backward(retain_graph=True) plus a list of graph-connected losses.
struct GraphLifetime {
  bool retain_graph = false;
  bool keep_graph_connected_loss = false;
};

struct PresetSpec {
  ModelSpec model;
  int batch_size = 1;
  int steps = 1;
};

struct CaseSpec {
  std::string name;
  std::string description;
  std::string source;  // the file it came from
  OptimizerSpec optimizer;
  GraphLifetime graph;
  std::string default_preset = "small";
  std::map<std::string, PresetSpec> presets;

  const PresetSpec& preset(const std::string& name) const;
};

// One line: "<file>: <field>: <problem>".
class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

CaseSpec parse_case(const nlohmann::json& doc, const std::string& source);
CaseSpec load_case_file(const std::string& path);

// "alpha" is looked up as alpha.json in the search directories in order;
// anything containing '/' or ending in .json is taken as a path.
CaseSpec resolve_case(const std::string& name_or_path, const std::vector<std::string>& search_dirs);
std::vector<CaseSpec> list_cases(const std::vector<std::string>& search_dirs);

// The case as it was run: description, optimizer, graph lifetime and the
// chosen preset's model, for the report's "case" object.
nlohmann::json resolved_case_json(const CaseSpec& c, const std::string& preset);

}  // namespace memdiag
