#include "memdiag/sweep_plan.hpp"

#include "json_reader.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/output_names.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace memdiag {
using detail::JsonNode;

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.emplace_back();
  return out;
}

bool plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::vector<int> parse_count_list(const std::string& flag, const std::string& text, std::int64_t lo,
                                  std::int64_t hi) {
  std::vector<int> out;
  for (std::int64_t v : parse_integer_list(flag, text, lo, std::min<std::int64_t>(hi, INT32_MAX))) {
    out.push_back(static_cast<int>(v));
  }
  return out;
}

std::vector<std::int64_t> parse_integer_list(const std::string& flag, const std::string& text, std::int64_t lo,
                                             std::int64_t hi) {
  if (text.empty()) throw UsageError(flag + ": empty; give a number or a comma-separated list");
  std::vector<std::int64_t> out;
  for (const std::string& item : split(text)) {
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (item.size() > 1 && item[0] == '0')) {
      if (!item.empty() && item[0] == '-') {
        throw UsageError(flag + ": must be at least " + std::to_string(lo) + ", got " + item);
      }
      throw UsageError(flag + ": '" + item + "' is not a whole number in decimal" +
                       (item.empty() ? " (empty item in '" + text + "')" : std::string()));
    }
    // Longer than hi's digits is over hi, and would not fit in 64 bits.
    if (item.size() > std::to_string(hi).size()) {
      throw UsageError(flag + ": must be at most " + std::to_string(hi) + ", got " + item);
    }
    const std::int64_t v = std::stoll(item);
    if (v < lo) throw UsageError(flag + ": must be at least " + std::to_string(lo) + ", got " + item);
    if (v > hi) throw UsageError(flag + ": must be at most " + std::to_string(hi) + ", got " + item);
    out.push_back(v);
  }
  return out;
}

double parse_decimal(const std::string& flag, const std::string& text, double lo, double hi) {
  const auto dot = text.find('.');
  const std::string whole = text.substr(0, dot), fraction = dot == std::string::npos ? "" : text.substr(dot + 1);
  const bool digits = !whole.empty() && whole.find_first_not_of("0123456789") == std::string::npos &&
                      (dot == std::string::npos ||
                       (!fraction.empty() && fraction.find_first_not_of("0123456789") == std::string::npos));
  if (!digits || whole.size() > 18) {
    throw UsageError(flag + ": '" + text + "' is not a decimal number" + (text.empty() ? " (empty)" : ""));
  }
  const double v = std::stod(text);
  auto fmt = [](double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  };
  if (v < lo) throw UsageError(flag + ": must be at least " + fmt(lo) + ", got " + text);
  if (v > hi) throw UsageError(flag + ": must be at most " + fmt(hi) + ", got " + text);
  return v;
}

std::vector<std::string> parse_name_list(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError(flag + ": empty; give a name or a comma-separated list");
  std::vector<std::string> out = split(text);
  for (const std::string& item : out) {
    if (item.empty()) throw UsageError(flag + ": empty item in '" + text + "'");
  }
  return out;
}

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
