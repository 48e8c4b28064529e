#include "memdiag/launch.hpp"

#include "memdiag/errors.hpp"

#include <cstdlib>
#include <exception>
#include <utility>

namespace memdiag {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int lo, int hi) {
  const std::string v = *env(name);
  std::size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || x < lo || x > hi) {
    throw UsageError(std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]");
  }
  return x;
}

}  // namespace

std::optional<LaunchInfo> launch_from_environment() {
  if (!env("RANK") && !env("WORLD_SIZE")) return std::nullopt;
  // One without the other is no launcher's: running as one process would
  // write a report that is not the rank the job meant.
  for (const auto& [given, missing] : {std::pair{"RANK", "WORLD_SIZE"}, std::pair{"WORLD_SIZE", "RANK"}}) {
    if (env(given) && !env(missing)) {
      throw UsageError(std::string(given) + "='" + *env(given) + "' is set and " + missing +
                       " is not: a launcher sets both (torchrun does), a single process neither");
    }
  }
  LaunchInfo l;
  l.world_size = env_int("WORLD_SIZE", 1, 1 << 20);
  l.rank = env_int("RANK", 0, l.world_size - 1);
  l.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, 1 << 16) : l.rank;
  l.local_world_size =
      env("LOCAL_WORLD_SIZE") ? env_int("LOCAL_WORLD_SIZE", 1, l.world_size) : l.world_size;
  l.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
  l.master_port = env("MASTER_PORT") ? env_int("MASTER_PORT", 1, 65535) : 29500;
  const std::string agent = env("TORCHELASTIC_USE_AGENT_STORE").value_or("");
  l.agent_store = agent == "True" || agent == "true" || agent == "1";
  return l;
}

}  // namespace memdiag
