#include "memdiag/run_spec.hpp"

#include <sstream>

namespace memdiag {

namespace {
// Shortest spelling that reads back as the same double.
std::string number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  std::ostringstream shorter;
  shorter << v;
  return std::stod(shorter.str()) == v ? shorter.str() : os.str();
}
}  // namespace

std::vector<std::string> to_argv(const RunSpec& r, const std::string& program) {
  std::vector<std::string> a;
  if (r.world_size > 1) {
    a = {"torchrun", "--nproc-per-node=" + std::to_string(r.world_size), "--no-python"};
  }
  a.push_back(program);
  a.insert(a.end(), {"--case", r.case_ref});
  if (r.device) a.insert(a.end(), {"--device", *r.device});
  if (r.preset) a.insert(a.end(), {"--preset", *r.preset});
  if (r.batch_size_per_device) a.insert(a.end(), {"--batch-size-per-device", std::to_string(*r.batch_size_per_device)});
  if (r.steps) a.insert(a.end(), {"--steps", std::to_string(*r.steps)});
  if (r.sequence_length) a.insert(a.end(), {"--sequence-length", std::to_string(*r.sequence_length)});
  if (r.seed) a.insert(a.end(), {"--seed", std::to_string(*r.seed)});
  if (r.memory_limit_mib) a.insert(a.end(), {"--memory-limit-mib", number(*r.memory_limit_mib)});
  if (r.find_max_batch) a.push_back("--find-max-batch");
  if (r.rank_zero_extra_samples > 0) {
    a.insert(a.end(), {"--rank-zero-extra-samples", std::to_string(r.rank_zero_extra_samples)});
  }
  if (r.world_size > 1 && *definition(r.mode).flag) a.push_back(definition(r.mode).flag);
  if (r.world_size > 1 && definition(r.mode).shards_gradients) {
    if (r.unit_modules != 1) a.insert(a.end(), {"--shard-unit-modules", std::to_string(r.unit_modules)});
    if (r.prefetch_next) a.insert(a.end(), {"--shard-prefetch", "next"});
  }
  if (!r.remedies.empty()) a.insert(a.end(), {"--remedy", remedies_label(r.remedies)});
  if (!r.warm_up_kernels) a.push_back("--no-warmup");
  for (const std::string& d : r.case_dirs) a.insert(a.end(), {"--cases-dir", d});
  if (r.quiet) a.push_back("--quiet");
  if (r.overwrite) a.push_back("--overwrite");
  if (!r.output.empty()) a.insert(a.end(), {"--output", r.output});
  return a;
}

std::string shell_quote(const std::string& w) {
  if (w.empty()) return "''";
  bool plain = true;
  for (char c : w) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string("-_./=:,+@%").find(c) != std::string::npos;
    plain = plain && ok;
  }
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& w : argv) s += (s.empty() ? "" : " ") + shell_quote(w);
  return s;
}

}  // namespace memdiag
