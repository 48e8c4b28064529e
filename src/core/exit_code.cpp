#include "memdiag/exit_code.hpp"

namespace memdiag {

ExitCode exit_code_for(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return ExitCode::kOk;
    case RunStatus::kOom: return ExitCode::kOom;
    case RunStatus::kInterrupted: return ExitCode::kInterrupted;
    case RunStatus::kFailed: return ExitCode::kFailed;
  }
  return ExitCode::kFailed;
}

ExitCode exit_code_for(const std::vector<RunStatus>& statuses) {
  ExitCode code = ExitCode::kOk;
  for (RunStatus s : statuses) {
    const ExitCode c = exit_code_for(s);
    if (c == ExitCode::kInterrupted) return c;
    if (c == ExitCode::kFailed || (c == ExitCode::kOom && code == ExitCode::kOk)) code = c;
  }
  return code;
}

}  // namespace memdiag
