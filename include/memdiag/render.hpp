// Renderers: an Analysis in, text out. They add no judgement of their own.
#pragma once

#include "memdiag/analysis.hpp"
#include "memdiag/report_reader.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace memdiag {

enum class Format { kText, kMarkdown, kJson };

std::string render_text(const Analysis& a);
std::string render_markdown(const Analysis& a);
nlohmann::json render_json(const Analysis& a, const std::vector<ReadError>& errors = {});

// Per-run figures the renderers share, as table cells.
struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::string to_text(const std::string& indent = "") const;
  std::string to_markdown() const;
};
Table runs_table(const Group& g);
Table ranks_table(const DistributedView& d);
std::string fmt_mib(const std::optional<double>& v);
// "alpha on cuda (3 reports)"
std::string group_title(const Group& g);

}  // namespace memdiag
