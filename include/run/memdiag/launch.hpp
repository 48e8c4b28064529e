// What a launcher (torchrun, or anything setting the same variables) says
// about this process. Read from the environment without LibTorch, so the
// front executable refuses a malformed launch before it loads LibTorch;
// the torch layer joins the process group it describes
// (memdiag/distributed.hpp).
#pragma once

#include <optional>
#include <string>

namespace memdiag {

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// and TORCHELASTIC_USE_AGENT_STORE when the launcher's agent already hosts
// the store.
struct LaunchInfo {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  // Ranks on this host; WORLD_SIZE where the launcher does not say.
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;
};

// nullopt when the variables are absent (a plain single-process run).
// Throws UsageError naming the variable when one is malformed, or when
// RANK or WORLD_SIZE is set without the other (naming the one missing).
std::optional<LaunchInfo> launch_from_environment();

}  // namespace memdiag
