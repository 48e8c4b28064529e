#include "memdiag/allocator_settings.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"
#include "memdiag/remedy.hpp"

#include <c10/core/AllocatorConfig.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace memdiag {
namespace {

using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;
constexpr std::size_t kMB = 1024 * 1024;
constexpr std::size_t kDefaultNonSplitRounding = 20 * kMB;

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

}  // namespace

std::string current_allocator_settings() {
  std::vector<std::string> parts;
  if (Config::use_expandable_segments()) parts.push_back("expandable_segments:True");
  if (Config::max_split_size() != std::numeric_limits<std::size_t>::max()) {
    parts.push_back("max_split_size_mb:" + std::to_string(Config::max_split_size() / kMB));
  }
  if (Config::garbage_collection_threshold() > 0) {
    parts.push_back("garbage_collection_threshold:" + format_fixed(Config::garbage_collection_threshold(), 2));
  }
  const std::vector<std::size_t>& divisions = Config::roundup_power2_divisions();
  if (std::any_of(divisions.begin(), divisions.end(), [](std::size_t d) { return d != 0; })) {
    const bool uniform = std::all_of(divisions.begin(), divisions.end(), [&](std::size_t d) { return d == divisions.front(); });
    if (uniform) {
      parts.push_back("roundup_power2_divisions:" + std::to_string(divisions.front()));
    } else {
      // Per interval, as the allocator holds them (1 MiB, 2 MiB, ... 64 GiB).
      std::string list;
      for (std::size_t d : divisions) list += (list.empty() ? "" : ";") + std::to_string(d);
      parts.push_back("roundup_power2_divisions:[" + list + "]");
    }
  }
  if (Config::max_non_split_rounding_size() != kDefaultNonSplitRounding) {
    parts.push_back("max_non_split_rounding_mb:" + std::to_string(Config::max_non_split_rounding_size() / kMB));
  }
  return join(parts);
}

void apply_allocator_settings(const std::string& asked) {
  if (asked.empty()) return;
  // Parsing a settings string resets max_split_size_mb,
  // roundup_power2_divisions and garbage_collection_threshold to PyTorch's
  // defaults unless it names them (torch 2.11's
  // AcceleratorAllocatorConfig::parseArgs): the run's settings are laid on
  // what the process runs under (the environment's), not put in its place.
  const std::string settings = merge_allocator_settings(current_allocator_settings(), asked);
  try {
    c10::CachingAllocator::setAllocatorSettings(settings);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error("the CUDA caching allocator refused '" + settings + "': " + what.substr(0, what.find('\n')));
  }
  // Each key asked for must now read back as asked.
  const std::string now = "," + current_allocator_settings() + ",";
  std::size_t start = 0;
  while (start <= settings.size()) {
    const std::size_t end = std::min(settings.find(',', start), settings.size());
    const std::string item = settings.substr(start, end - start);
    if (!item.empty() && now.find("," + item + ",") == std::string::npos) {
      throw Error("the CUDA caching allocator did not take '" + item + "' (it runs under '" +
                  current_allocator_settings() + "')");
    }
    start = end + 1;
  }
}

}  // namespace memdiag
