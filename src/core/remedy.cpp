#include "memdiag/remedy.hpp"

#include "memdiag/errors.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace memdiag {

const char* to_string(RemedyKind k) {
  switch (k) {
    case RemedyKind::kCheckpoint: return "checkpoint";
    case RemedyKind::kAccumulate: return "accumulate";
    case RemedyKind::kBf16: return "bf16";
    case RemedyKind::kAutocastBf16: return "autocast-bf16";
    case RemedyKind::kEmptyCache: return "empty-cache";
    case RemedyKind::kFixGraph: return "fix-graph";
    case RemedyKind::kSgd: return "sgd";
  }
  return "?";
}

std::string to_string(const Remedy& r) {
  std::string s = to_string(r.kind);
  if (r.param > 0) s += "=" + std::to_string(r.param);
  return s;
}

namespace {

constexpr RemedyKind kAll[] = {RemedyKind::kCheckpoint,   RemedyKind::kAccumulate, RemedyKind::kBf16,
                               RemedyKind::kAutocastBf16, RemedyKind::kEmptyCache, RemedyKind::kFixGraph,
                               RemedyKind::kSgd};

std::string known() {
  std::string s;
  for (RemedyKind k : kAll) s += (s.empty() ? "" : ", ") + std::string(to_string(k));
  return s + " (checkpoint[=N], accumulate=K), joined with '+'";
}

Remedy parse_one(const std::string& flag, const std::string& item) {
  const auto eq = item.find('=');
  const std::string name = item.substr(0, eq);
  for (RemedyKind k : kAll) {
    if (name != to_string(k)) continue;
    Remedy r{k, 0};
    const bool takes = k == RemedyKind::kCheckpoint || k == RemedyKind::kAccumulate;
    if (eq == std::string::npos) {
      if (k == RemedyKind::kAccumulate) throw UsageError(flag + ": accumulate needs K micro-batches (accumulate=4)");
      return r;
    }
    const std::string v = item.substr(eq + 1);
    if (!takes) throw UsageError(flag + ": " + name + " takes no parameter ('" + item + "')");
    if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos || v[0] == '0') {
      throw UsageError(flag + ": '" + item + "': the parameter must be a whole number of 1 or more");
    }
    r.param = std::stoi(v);
    if (k == RemedyKind::kAccumulate && r.param < 2) {
      throw UsageError(flag + ": accumulate=" + v + " changes nothing; give 2 or more micro-batches");
    }
    return r;
  }
  throw UsageError(flag + ": unknown remedy '" + item + "' (known: " + known() + ")");
}

}  // namespace

std::vector<Remedy> parse_remedies(const std::string& flag, const std::string& text) {
  std::vector<Remedy> out;
  if (text.empty() || text == "none") return out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, '+');) {
    if (item.empty()) throw UsageError(flag + ": empty remedy in '" + text + "'");
    const Remedy r = parse_one(flag, item);
    for (const Remedy& o : out) {
      if (o.kind == r.kind) throw UsageError(flag + ": " + to_string(r.kind) + " given twice in '" + text + "'");
    }
    out.push_back(r);
  }
  if (text.back() == '+') throw UsageError(flag + ": empty remedy in '" + text + "'");
  auto has = [&](RemedyKind k) {
    return std::any_of(out.begin(), out.end(), [k](const Remedy& r) { return r.kind == k; });
  };
  if (has(RemedyKind::kBf16) && has(RemedyKind::kAutocastBf16)) {
    throw UsageError(flag + ": bf16 and autocast-bf16 exclude each other (bf16 weights leave nothing to autocast)");
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Remedy> resolve_remedies(std::vector<Remedy> remedies, int depth) {
  for (Remedy& r : remedies) {
    if (r.kind == RemedyKind::kCheckpoint && r.param == 0) {
      r.param = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(depth)))));
    }
  }
  return remedies;
}

std::optional<Remedy> find_remedy(const std::vector<Remedy>& remedies, RemedyKind kind) {
  for (const Remedy& r : remedies) {
    if (r.kind == kind) return r;
  }
  return std::nullopt;
}

std::string remedies_label(const std::vector<Remedy>& remedies) {
  if (remedies.empty()) return "none";
  std::string s;
  for (const Remedy& r : remedies) s += (s.empty() ? "" : "+") + to_string(r);
  return s;
}

}  // namespace memdiag
