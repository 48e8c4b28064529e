// Renderers: an Analysis in, words out. Every sentence memdiag prints is
// written here, from the analysis's typed records; the renderers add no
// judgement of their own.
#pragma once

#include "memdiag/analysis.hpp"
#include "memdiag/errors.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace memdiag {

enum class OutputFormat { kText, kMarkdown, kJson };

std::string render_text(const Analysis& a);
std::string render_markdown(const Analysis& a);
// The comparison as JSON (docs/comparison-output.md): the rendered sentences
// beside the structured records they came from.
nlohmann::json render_json(const Analysis& a, const std::vector<InputError>& errors = {});
// Version of render_json's layout; bumped on any change a consumer could misread.
inline constexpr int kComparisonSchemaVersion = 2;

// --- words for the analysis's records -------------------------------------
// "forward activations"
const char* cause_label(Cause c);
// Which measurement gives a cause's MiB: "forward increment (steady state)".
const char* cause_basis(Cause c);
// What to do about a cause, and the remedies that would not help.
const char* cause_response(Cause c);
const std::vector<const char*>& cause_not_helpful(Cause c);

std::string describe(const Evidence& e);
std::string describe(const Warning& w);
// Why a verdict is inconclusive; empty for a dominant cause.
std::string describe(const Decision& d, const std::string& primary_source);
// "batch 4, preset small, 3 steps" style labels.
std::string describe_point(const RunPoint& p);
// "preset small, batch 8, 4 steps": the label of a set of ranks.
std::string describe_rank_run(const RunPoint& p);
std::string describe(const RunStop& s);

// --- tables ------------------------------------------------------------------
struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::string to_text(const std::string& indent = "") const;
  std::string to_markdown() const;
};
Table runs_table(const Group& g);
Table ranks_table(const DistributedView& d);
// "alpha on cuda (3 reports)"
std::string group_title(const Group& g);

}  // namespace memdiag
