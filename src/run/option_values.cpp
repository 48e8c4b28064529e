#include "option_values.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/limits.hpp"

#include <cstdint>
#include <string>

namespace memdiag::detail {
namespace {

std::string whole(double v) { return std::to_string(static_cast<long long>(v)); }

// A count in [lo, hi], compared in the option's own type (a program
// calling run_harness may set any value).
template <typename T>
void check_count(const char* flag, T v, std::int64_t lo, std::int64_t hi, const char* why = "") {
  if (v < static_cast<T>(lo) || v > static_cast<T>(hi)) {
    throw UsageError(std::string(flag) + ": must be " + std::to_string(lo) + " to " + std::to_string(hi) + why +
                     ", got " + std::to_string(v));
  }
}

}  // namespace

void check_option_values(const HarnessOptions& opts) {
  namespace lim = limits;
  // The report must read back what was run: an infinite limit or one past
  // any device is no limit at all, and the reader refuses such a figure.
  if (opts.memory_limit_mib && !(*opts.memory_limit_mib > 0 && *opts.memory_limit_mib <= lim::kAbsurdMiB)) {
    throw UsageError("--memory-limit-mib: must be greater than 0 and at most " + whole(lim::kAbsurdMiB) +
                     " (1 PiB); leave it out for no limit");
  }
  // A JSON reader holds integers exactly up to 2^53.
  check_count("--seed", opts.seed, 0, lim::kMaxExactInteger, " (a report holds larger seeds inexactly)");
  check_count("--rank-zero-extra-samples", opts.rank_zero_extra_samples, 0, lim::kMaxBatch);
  check_count("--shard-unit-modules", opts.shard_unit_modules, 1, lim::kMaxDepth);
  check_count("--snapshot-max-entries", opts.snapshot_max_entries, 1, 100'000'000);
  if (!(opts.dist_timeout_s > 0 && opts.dist_timeout_s <= lim::kMaxTimeoutSeconds)) {
    throw UsageError("--dist-timeout-s: must be greater than 0 and at most " + whole(lim::kMaxTimeoutSeconds));
  }
}

}  // namespace memdiag::detail
