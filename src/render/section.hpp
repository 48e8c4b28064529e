// Internal to memdiag::render: what one group's section says, decided once
// and laid out by every format (text, markdown, HTML, JUnit's failure
// bodies), so that no format can drop what another says. JSON keeps the
// records as well as these sentences.
#pragma once

#include "memdiag/render.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memdiag::detail {

struct Section {
  std::string title;           // "alpha on cuda (3 reports)"
  std::string cause;           // "activations"
  std::string label;           // "forward activations"
  bool confirmed = false;      // "confirmed by the sweep"
  std::string decision;        // why it is inconclusive; empty for a dominant cause
  std::vector<std::string> evidence;
  std::vector<std::string> warnings;
  std::string response;
  std::vector<std::string> not_helpful;
  std::vector<std::string> commands;  // shell-quoted confirming runs
  std::vector<std::string> command_costs;  // each one's expected cost in words, "" where unknown
  // Confirming runs memory_diagnostics cannot make (another producer's
  // report): the changes to make to the job, and who wrote the report.
  std::vector<std::string> changes;
  std::string changes_producer;
  // Remedies measured in the group (empty: none were run).
  std::string best_remedy;                      // the measured best, in words
  std::string sharding;                         // the sharded modes measured: what each answers, per rank
  std::string not_measured;                     // "accumulate, bf16": suggested but not run
  std::optional<Table> remedies;
  std::string parallel_modes_note;        // the modes measured side by side: the formulas and their figures
  std::optional<Table> parallel_modes;    // ... each mode per rank against them
  std::vector<std::string> capacity;  // predicted largest batches
  std::optional<Table> searches;  // --find-max-batch's answers per variant
  std::optional<Table> sharded_capacity;  // --world-size: the largest batch per rank under each mode
  Table runs;
  std::vector<std::pair<std::string, Table>> ranks;  // label, table
};

Section section_of(const Group& g, const Verdict& v);

// "dominant cause: activations (forward activations), confirmed by the sweep"
std::string cause_line(const Section& s);
// "to confirm, record the job again (memdiag::Recorder wrote the report; ...):"
std::string changes_heading(const Section& s);

}  // namespace memdiag::detail
