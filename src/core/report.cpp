#include "memdiag/report.hpp"

namespace memdiag {

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return "complete";
    case RunStatus::kOom: return "oom";
    case RunStatus::kInterrupted: return "interrupted";
    case RunStatus::kFailed: return "failed";
  }
  return "failed";
}

std::optional<RunStatus> run_status_from_string(const std::string& s) {
  if (s == "complete") return RunStatus::kComplete;
  if (s == "oom") return RunStatus::kOom;
  if (s == "interrupted") return RunStatus::kInterrupted;
  if (s == "failed") return RunStatus::kFailed;
  return std::nullopt;
}

}  // namespace memdiag
