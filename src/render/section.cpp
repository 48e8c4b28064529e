#include "section.hpp"

#include "memdiag/format.hpp"

namespace memdiag::detail {
namespace {

void make_printable(std::string& s) { s = printable(s); }
void make_printable(std::vector<std::string>& v) {
  for (std::string& s : v) make_printable(s);
}
void make_printable(Table& t) {
  make_printable(t.headers);
  for (auto& row : t.rows) make_printable(row);
}

// Every string a format lays out passes printable() here, once: names from
// reports and file names reach every format safe for a terminal and as
// well-formed UTF-8 (each format then escapes its own metacharacters).
void make_printable(Section& s) {
  for (std::string* f : {&s.title, &s.cause, &s.label, &s.decision, &s.response, &s.changes_producer, &s.best_remedy, &s.sharding,
                         &s.not_measured, &s.parallel_modes_note}) {
    make_printable(*f);
  }
  for (std::vector<std::string>* v : {&s.evidence, &s.warnings, &s.not_helpful, &s.commands, &s.command_costs, &s.changes, &s.capacity}) {
    make_printable(*v);
  }
  if (s.remedies) make_printable(*s.remedies);
  if (s.parallel_modes) make_printable(*s.parallel_modes);
  make_printable(s.runs);
  for (auto& [label, table] : s.ranks) {
    make_printable(label);
    make_printable(table);
  }
}

}  // namespace

Section section_of(const Group& g, const Verdict& v) {
  Section s;
  s.title = group_title(g);
  s.cause = to_string(v.dominant);
  s.label = cause_label_for(v);
  s.confirmed = v.confirmed;
  s.decision = describe(v.decision, v.primary_source);
  for (const Evidence& e : v.evidence) s.evidence.push_back(describe(e));
  for (const Warning& w : v.warnings) s.warnings.push_back(describe(w));
  s.response = response_for(v);
  if (v.dominant == Cause::kActivations && v.math_attention) {
    // The seed's "a more memory-efficient kernel", first where it applies.
    s.response = "The attention is spelt out (the math kernel keeps batch x heads x length x length scores for "
                 "backward): use PyTorch's fused scaled-dot-product attention first (--remedy efficient-attention). "
                 "Then: " + s.response;
  }
  s.not_helpful = not_helpful_for(v);
  for (const ConfirmingRun& c : v.confirm) {
    const std::string cost = describe_cost(c);
    if (c.runnable) {
      s.commands.push_back(shell_command(to_argv(c.run)));
      s.command_costs.push_back(cost);
    } else {
      s.changes.push_back(describe(c) + (cost.empty() ? "" : " (" + cost + ")"));
      s.changes_producer = c.producer;
    }
  }
  if (!v.remedies.empty()) {
    s.best_remedy = describe_best_remedy(v);
    s.sharding = describe_sharding(v);
    for (const std::string& n : remedies_not_measured(v)) s.not_measured += (s.not_measured.empty() ? "" : ", ") + n;
    s.remedies = remedies_table(v);
  }
  s.parallel_modes_note = describe_parallel_modes(v);
  s.parallel_modes = parallel_modes_table(v);
  for (const CapacityPrediction& c : v.capacity) s.capacity.push_back(describe(c));
  for (const SequenceCapacity& c : v.sequence_capacity) s.capacity.push_back(describe(c));
  for (const StepSizeCapacity& c : v.step_capacity) s.capacity.push_back(describe(c));
  s.searches = searches_table(g);
  s.sharded_capacity = sharded_capacity_table(v);
  for (const ShardedCapacity& c : v.sharded_capacity) {
    if (!c.weights_fit_budget && definition(c.mode).shards_parameters) {
      s.capacity.push_back(describe_weights_beyond_budget(c, v.sharded_capacity));
    }
  }
  s.runs = runs_table(g);
  for (const DistributedView& d : v.distributed) {
    s.ranks.emplace_back(describe_rank_run(d.run) + (d.variant != "none" ? ", " + d.variant : std::string()) +
                             (d.launch.empty() ? std::string() : ", launch " + d.launch),
                         ranks_table(d));
  }
  make_printable(s);
  return s;
}

std::string changes_heading(const Section& s) {
  return "to confirm, record the job again (" + s.changes_producer +
         " wrote the report; memory_diagnostics cannot run it):";
}

std::string cause_line(const Section& s) {
  return "dominant cause: " + s.cause + " (" + s.label + ")" + (s.confirmed ? ", confirmed by the sweep" : "");
}

}  // namespace memdiag::detail
