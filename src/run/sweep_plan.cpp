#include "memdiag/sweep_plan.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/flag_values.hpp"
#include "memdiag/json_reader.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/output_names.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>

namespace memdiag {
using detail::JsonNode;

namespace {

bool plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::vector<std::vector<Remedy>> parse_remedy_list(const std::string& flag, const std::string& text) {
  std::vector<std::vector<Remedy>> out;
  for (const std::string& item : parse_name_list(flag, text)) out.push_back(parse_remedies(flag, item));
  return out;
}

std::vector<RunRequest> expand_product(const SweepAxes& a) {
  // An empty list stands for one "unset" value.
  const std::vector<std::optional<std::string>> presets =
      a.presets.empty() ? std::vector<std::optional<std::string>>{std::nullopt}
                        : std::vector<std::optional<std::string>>(a.presets.begin(), a.presets.end());
  const std::vector<std::optional<int>> batches =
      a.batch_sizes.empty() ? std::vector<std::optional<int>>{std::nullopt}
                            : std::vector<std::optional<int>>(a.batch_sizes.begin(), a.batch_sizes.end());
  const std::vector<std::optional<int>> steps =
      a.steps.empty() ? std::vector<std::optional<int>>{std::nullopt}
                      : std::vector<std::optional<int>>(a.steps.begin(), a.steps.end());
  const std::vector<std::optional<int>> lengths =
      a.sequence_lengths.empty() ? std::vector<std::optional<int>>{std::nullopt}
                                 : std::vector<std::optional<int>>(a.sequence_lengths.begin(), a.sequence_lengths.end());
  const std::vector<std::vector<Remedy>> remedies =
      a.remedies.empty() ? std::vector<std::vector<Remedy>>{{}} : a.remedies;
  std::vector<RunRequest> out;
  for (const std::string& c : a.cases) {
    for (const auto& p : presets) {
      for (const auto& b : batches) {
        for (const auto& s : steps) {
          for (const auto& l : lengths) {
            for (const auto& rem : remedies) {
              RunRequest r;
              r.case_arg = c;
              r.preset = p;
              r.batch_size_per_device = b;
              r.steps = s;
              r.sequence_length = l;
              r.remedies = rem;
              out.push_back(std::move(r));
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<RunRequest> parse_plan_text(const std::string& text, const std::string& source) {
  const nlohmann::json doc = detail::parse_json_text(text, source);
  const JsonNode root(doc, source);
  root.expect_object();
  root.only({"description", "runs", "$comment"});
  const JsonNode runs = root.field("runs");
  runs.expect_array();
  if (runs.size() == 0) runs.fail("needs at least one run");
  std::vector<RunRequest> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const JsonNode n = runs.at(i);
    n.expect_object();
    n.only({"name", "case", "preset", "batch_size_per_device", "steps", "sequence_length", "remedy", "$comment"});
    RunRequest r;
    r.name = n.str("name");
    if (!plain_name(r.name)) n.field("name").fail("'" + r.name + "' is not a name of letters, digits, '_' and '-'");
    // A run's report is named after it: a longer name would be cut, and two
    // names alike in their first characters would name one file.
    if (r.name.size() > kMaxFileNamePart) {
      n.field("name").fail("'" + r.name.substr(0, 24) + "...' is " + std::to_string(r.name.size()) +
                           " characters; a run's name is at most " + std::to_string(kMaxFileNamePart) +
                           " (its report is named after it)");
    }
    if (!names.insert(r.name).second) n.field("name").fail("'" + r.name + "' names two runs");
    r.case_arg = n.str("case");
    if (r.case_arg.empty()) n.field("case").fail("empty case");
    if (n.given("preset")) r.preset = n.str("preset");
    if (auto b = n.opt_integer("batch_size_per_device", 1, limits::kMaxBatch)) r.batch_size_per_device = int(*b);
    if (auto s = n.opt_integer("steps", 1, limits::kMaxSteps)) r.steps = int(*s);
    if (auto l = n.opt_integer("sequence_length", 1, limits::kMaxSequenceLength)) r.sequence_length = int(*l);
    if (n.given("remedy")) {
      try {
        r.remedies = parse_remedies("remedy", n.str("remedy"));
      } catch (const UsageError& e) {
        n.field("remedy").fail(e.what());
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<RunRequest> read_plan_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", std::string("cannot open (") + std::strerror(errno) + ")");
  return parse_plan_text(detail::read_bounded(in, path), path);
}

}  // namespace memdiag
