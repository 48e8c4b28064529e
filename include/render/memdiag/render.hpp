// Renderers: an Analysis in, words out. Every sentence memdiag prints is
// written here, from the analysis's typed records; the renderers add no
// judgement of their own.
#pragma once

#include "memdiag/analysis.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/gates.hpp"
#include "memdiag/regression.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace memdiag {

enum class OutputFormat { kText, kMarkdown, kJson, kJunit, kHtml };

// One comparison as every format is handed it: the analysis, the gates'
// checks, the baseline's outcome where one was given, the reports read (the
// HTML page plots their samples), the inputs that could not be read (JSON
// lists them) and how long the comparison took (JUnit's time). Each format
// says all of it its own way; nothing is attached to a format afterwards.
struct Comparison {
  const Analysis& analysis;
  const std::vector<std::pair<std::string, Report>>& reports = no_reports();
  const std::vector<InputError>& errors = no_errors();
  const std::vector<GateCheck>& gates = no_gates();
  const RegressionReport* baseline = nullptr;
  double seconds = 0;

  static const std::vector<std::pair<std::string, Report>>& no_reports();
  static const std::vector<InputError>& no_errors();
  static const std::vector<GateCheck>& no_gates();
};

// The renderers, one shape: a comparison in, the document out. Text and
// markdown open with the gates' outcome (PASS or FAIL, failures first)
// where a gate or a baseline was given and end with the baseline's
// section; JSON carries the baseline under "baseline"
// (docs/comparison-output.md: the rendered sentences beside the structured
// records they came from); JUnit XML has a suite per kind of check; HTML
// is one self-contained page with inline SVG plots of every group's runs.
std::string render_text(const Comparison& c);
std::string render_markdown(const Comparison& c);
std::string render_json(const Comparison& c);
std::string render_junit(const Comparison& c);
std::string render_html(const Comparison& c);
// The renderer --format names.
std::string render(const Comparison& c, OutputFormat format);
// render_json's document as JSON, for a program that reads it.
nlohmann::json comparison_json(const Comparison& c);

// The regression gate against a baseline.
// "memory regressed", "no regression", or that nothing matched (a failure):
// the gate's outcome in words, the same in every format.
std::string regression_outcome(const RegressionReport& r);
std::string describe(const RegressionPair& p);
// "pr/resnet18.json matches no baseline: main/resnet18.json, the same job,
// ran batch 16 -> batch 32 (peak ...), not compared; ..."
std::string describe(const ConfigurationChange& c);
// The change a baseline (or a new report) without a counterpart is part
// of, where it is one.
const ConfigurationChange* change_of(const RegressionReport& r, const std::string& source);
// "--expect alpha=activations: alpha, cpu is activations"
std::string describe(const GateCheck& g);

// Version of render_json's layout; bumped on any change a consumer could misread.
inline constexpr int kComparisonSchemaVersion = 4;

// --- words for the analysis's records -------------------------------------
// "forward activations"
const char* cause_label(Cause c);
// The label of a verdict's cause: retained_graph's says tensors kept
// across steps where the walk's kept tensors account for the growth.
std::string cause_label_for(const Verdict& v);
// Which measurement gives a cause's MiB: "forward increment (steady state)".
const char* cause_basis(Cause c);
// What to do about a cause, and the remedies that would not help.
const char* cause_response(Cause c);
// The verdict's "would not help", less what its own evidence contradicts
// (a claim that the post-cleanup allocation is stable where it grew).
std::vector<std::string> not_helpful_for(const Verdict& v);
// The verdict's response: the cause's, made specific to what the loop kept
// where the report names it (outputs in a list, a running sum, retain_graph).
std::string response_for(const Verdict& v);

std::string describe(const Evidence& e);
std::string describe(const Warning& w);
// Why a verdict is inconclusive; empty for a dominant cause.
std::string describe(const Decision& d, const std::string& primary_source);
// "batch 4, preset small, 3 steps" style labels.
std::string describe_point(const RunPoint& p);
// "preset small, batch 8, 4 steps": the label of a set of ranks.
std::string describe_rank_run(const RunPoint& p);
std::string describe(const RunStop& s);
// A confirming run as a change to the job: "with batch 1", "with 10 steps".
std::string describe(const ConfirmingRun& c);
// "expected: peak about 120.4 MiB, its 4 steps about 0.41 s": empty when
// the report confirmed cannot say.
std::string describe_cost(const ConfirmingRun& c);
std::string describe(const CapacityPrediction& c);
std::string describe(const SequenceCapacity& c);
std::string describe(const StepSizeCapacity& c);
// A --world-size answer for a mode that shards the weights, where the whole
// weights exceed its budget: the modes (among `all`, at the same budget and
// world size) that cannot hold the model, and what this one holds and fits.
std::string describe_weights_beyond_budget(const ShardedCapacity& sharded, const std::vector<ShardedCapacity>& all);
// "step()", "backward at its start (activations held)": a capacity line's phase.
std::string describe_phase_line(const PhaseLine& l);
// "288.6 MiB (weights 64.16, gradients 64.16, optimizer state 128.3, its temporaries 32.0)".
std::string describe_fixed_part(const PhaseLine& l);

// --- tables ------------------------------------------------------------------
struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::string to_text(const std::string& indent = "") const;
  std::string to_markdown() const;
};

// A matched run's phases against its baseline's: peak and end of each,
// the change, which regressed (the text, markdown and HTML tables).
Table regression_phase_table(const RegressionPair& p);
// What the gate checks, in its words, each with whether it held (the
// summaries at the head of the outputs and HTML's gate section).
struct GateLine {
  bool held = false;
  std::string words;
};
std::vector<GateLine> gate_lines(const std::vector<GateCheck>& gates, const RegressionReport* r);
// "5.0%", "5.0% and 10.00 MiB": what a peak may grow by.
std::string regression_threshold(const RegressionThresholds& t);
// Text for markdown outside code: & and < as entities (a report's names
// cannot open HTML tags or spell entities in a rendered comment).
std::string markdown_text(const std::string& s);
Table runs_table(const Group& g);
// --find-max-batch's answers in the group, one row per report with a
// search: the variant, the largest batch, what the allocator held there.
std::optional<Table> searches_table(const Group& g);
// The remedies measured against the baseline, one row each.
Table remedies_table(const Verdict& v);
// --world-size: each mode's largest batch per rank (absent without).
std::optional<Table> sharded_capacity_table(const Verdict& v);
// The parallel modes measured side by side, per rank: the replicated run
// and each mode's, weights and model state beside their formulas, the
// forward, the peak, the losses (absent without a mode run beside a
// replicated one); and the formulas with the figures they were given.
std::optional<Table> parallel_modes_table(const Verdict& v);
std::string describe_parallel_modes(const Verdict& v);
// The sharded modes measured, per rank: what each divides, its model state
// against its formula, and whether it answers the verdict's cause (empty
// without a sharded run).
std::string describe_sharding(const Verdict& v);
// "checkpoint=6 lowers the peak from 74.20 to 29.22 MiB (-60.6%) ...", or
// empty when no measured remedy reduces the cause.
std::string describe_best_remedy(const Verdict& v);
// The remedies and sharded modes the analysis found suggested for the cause
// but not measured, by their names.
std::vector<std::string> remedies_not_measured(const Verdict& v);
Table ranks_table(const DistributedView& d);
// "alpha on cuda (3 reports)"
std::string group_title(const Group& g);

}  // namespace memdiag
