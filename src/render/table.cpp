// Tables of per-run and per-rank figures, in text and markdown.
#include "memdiag/render.hpp"

#include "memdiag/format.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

namespace memdiag {

std::string Table::to_text(const std::string& indent) const {
  std::vector<std::size_t> w(headers.size(), 0);
  for (std::size_t i = 0; i < headers.size(); ++i) w[i] = headers[i].size();
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::string c = i < cells.size() ? cells[i] : "";
      // First column left-aligned (names), figures right-aligned.
      if (i == 0) {
        s += c + std::string(w[i] - c.size(), ' ');
      } else {
        s += "  " + std::string(w[i] - c.size(), ' ') + c;
      }
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(headers);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string Table::to_markdown() const {
  // A '|' in a cell would split it: escaped, as are HTML's metacharacters.
  auto cell = [](const std::string& c) {
    std::string out;
    // Backslashes first, or an input "\|" would become "\\|": an escaped
    // backslash, then a bar that splits the cell.
    for (const char ch : markdown_text(c)) out += ch == '|' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    return out;
  };
  std::string out = "|";
  for (const auto& h : headers) out += " " + cell(h) + " |";
  out += "\n|";
  for (std::size_t i = 0; i < headers.size(); ++i) out += i == 0 ? " --- |" : " ---: |";
  out += "\n";
  for (const auto& r : rows) {
    out += "|";
    for (std::size_t i = 0; i < headers.size(); ++i) out += " " + (i < r.size() ? cell(r[i]) : std::string()) + " |";
    out += "\n";
  }
  return out;
}

std::string markdown_text(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      // '>' alone opens nothing and reads better as itself ("16 -> 64").
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string group_title(const Group& g) {
  std::string t = g.case_name + " on " + g.device_kind;
  if (g.world_size > 1) t += ", " + std::to_string(g.world_size) + " ranks";
  t += " (" + std::to_string(g.runs.size()) + " report" + (g.runs.size() == 1 ? "" : "s") + ")";
  return t;
}

namespace {

// "oom: 96.08 + 4.00 > 100.0 MiB": at an out-of-memory, what was in use,
// what was asked for and the budget, in MiB, where the report says.
std::string status_cell(const RunFeatures& r) {
  std::string s = to_string(r.status);
  if (!r.oom) return s;
  const OomDetails& d = r.oom->details;
  if (d.allocated_mib && d.request_mib && r.oom->budget_mib) {
    s += ": " + format_mib(*d.allocated_mib) + " + " + format_mib(*d.request_mib) + " > " +
         format_mib(*r.oom->budget_mib) + " MiB";
  }
  return s;
}

// The slope, or where the post-cleanup allocation rose and stopped (a cache
// filled at the first steps), the rise: a slope beside "flat since" read
// as growth (an independent check's 4.11 MiB/step beside one rise).
std::string growth_cell(const RunFeatures& r) {
  if (!r.growth_significant && r.one_rise) return "rose " + format_mib(r.one_rise->mib);
  return format_mib(r.growth_per_step_mib);
}

}  // namespace

Table runs_table(const Group& g) {
  Table t;
  t.headers = {"report", "rank", "batch", "preset", "steps", "params MiB", "forward MiB",
               "1st-step MiB", "growth MiB/step", "peak MiB", "reserved MiB", "status"};
  // A remedy column only where some run has one, so plain sweeps read as before.
  bool remedies = false;
  for (const RunFeatures& r : g.runs) remedies = remedies || !is_baseline_variant(r.id);
  if (remedies) t.headers.insert(t.headers.begin() + 1, "remedy");
  // The allocator's stranded memory and retries where it said (CUDA reports
  // of memdiag 0.3 on): reserved against allocated with the gap trapped.
  bool allocator = false;
  for (const RunFeatures& r : g.runs) allocator = allocator || r.alloc_retries.has_value();
  if (allocator) t.headers.insert(t.headers.end() - 1, {"stranded MiB", "retries"});
  // The host where the reports say (memdiag's own runs): what offloading
  // and pinned copies cost there.
  bool host = false, pinned = false;
  for (const RunFeatures& r : g.runs) {
    host = host || r.peak_host_resident_mib.has_value();
    pinned = pinned || r.peak_host_pinned_mib.has_value();
  }
  if (host) t.headers.insert(t.headers.end() - 1, "host MiB");
  if (pinned) t.headers.insert(t.headers.end() - 1, "pinned MiB");
  for (const RunFeatures& r : g.runs) {
    t.rows.push_back({
        std::filesystem::path(r.source).filename().string(),
        std::to_string(r.id.rank),
        std::to_string(r.config.batch_size_per_device),
        r.config.preset,
        std::to_string(r.steps.size()),
        format_mib(r.parameter_mib),
        format_mib(r.forward_increment_mib),
        format_mib(r.first_step_persistent_mib),
        growth_cell(r),
        format_mib(r.peak_allocated_mib),
        format_mib(r.peak_reserved_mib),
        status_cell(r),
    });
    if (allocator) {
      std::vector<std::string>& row = t.rows.back();
      row.insert(row.end() - 1, {format_mib(r.max_inactive_split_mib),
                                 r.alloc_retries ? std::to_string(*r.alloc_retries) : std::string("-")});
    }
    if (host) t.rows.back().insert(t.rows.back().end() - 1, format_mib(r.peak_host_resident_mib));
    if (pinned) t.rows.back().insert(t.rows.back().end() - 1, format_mib(r.peak_host_pinned_mib));
    if (remedies) t.rows.back().insert(t.rows.back().begin() + 1, variant_label(r.id));
  }
  return t;
}

std::optional<Table> searches_table(const Group& g) {
  Table t;
  t.headers = {"variant", "limit MiB", "largest batch", "runs out at", "confirmed", "peak MiB", "reserved MiB",
               "stranded MiB", "retries", "ms/step", "report"};
  std::vector<const RunFeatures*> runs;
  for (const RunFeatures& r : g.runs) {
    if (r.capacity_search) runs.push_back(&r);
  }
  if (runs.empty()) return std::nullopt;
  // The baseline first, then by the batch found, largest last.
  std::stable_sort(runs.begin(), runs.end(), [](const RunFeatures* a, const RunFeatures* b) {
    const bool ab = is_baseline_variant(a->id), bb = is_baseline_variant(b->id);
    if (ab != bb) return ab;
    return a->capacity_search->max_batch < b->capacity_search->max_batch;
  });
  for (const RunFeatures* r : runs) {
    const CapacitySearch& c = *r->capacity_search;
    t.rows.push_back({
        variant_label(r->id),
        format_mib(c.limit_mib),
        std::to_string(c.max_batch),
        c.first_failing_batch ? std::to_string(*c.first_failing_batch) : std::string("-"),
        c.confirmed ? (*c.confirmed ? "yes" : "no") : "-",
        format_mib(r->peak_allocated_mib),
        format_mib(r->peak_reserved_mib),
        format_mib(r->max_inactive_split_mib),
        r->alloc_retries ? std::to_string(*r->alloc_retries) : std::string("-"),
        r->ms_per_step ? format_fixed(*r->ms_per_step, 1) : std::string("-"),
        std::filesystem::path(r->source).filename().string(),
    });
  }
  return t;
}

// "48.5 (47.9-49.3)": the median step after the first and the spread of
// those steps, so a ratio is read against how much the steps vary.
std::string ms_cell(const RemedyRow& r) {
  if (!r.ms_per_step) return "-";
  std::string s = format_fixed(*r.ms_per_step, 1);
  if (r.ms_per_step_min && r.ms_per_step_max && *r.ms_per_step_max > *r.ms_per_step_min) {
    s += " (" + format_fixed(*r.ms_per_step_min, 1) + "-" + format_fixed(*r.ms_per_step_max, 1) + ")";
  }
  return s;
}

Table remedies_table(const Verdict& v) {
  Table t;
  std::string cause = to_string(v.dominant);
  // Inconclusive: a row reduces the cause where it reduces either of the
  // two consumers within the margin, and its cell says which.
  const bool tied = v.dominant == Cause::kInconclusive && v.decision.top && v.decision.runner_up;
  if (tied) cause = std::string(to_string(v.decision.top->cause)) + " or " + to_string(v.decision.runner_up->cause);
  t.headers = {"remedy", "peak MiB", "vs baseline", "forward MiB", "1st-step MiB", "growth MiB/step",
               "reserved at end", "ms/step", "time", "max loss diff", "reduces " + cause + " (MiB)"};
  // Remedies measured against more than one baseline (a sweep of lengths or
  // batches, each with its remedies): each row says which.
  std::set<std::string> baselines;
  for (const RemedyRow& r : v.remedies) baselines.insert(r.baseline_source);
  const bool several = baselines.size() > 1;
  if (several) t.headers.insert(t.headers.begin() + 1, "against");
  // Sharded modes: the rank's model state beside its formula.
  const bool modes = std::any_of(v.remedies.begin(), v.remedies.end(), [](const RemedyRow& r) { return r.formula_mib.has_value(); });
  if (modes) {
    t.headers.push_back("model state MiB/rank");
    t.headers.push_back("formula");
  }
  // The host's side of a remedy (offloading moves memory there): the most
  // held resident against the baseline's, where both reports say.
  const bool host = std::any_of(v.remedies.begin(), v.remedies.end(), [](const RemedyRow& r) {
    return r.host_peak_mib.has_value() && r.baseline_host_peak_mib.has_value();
  });
  if (host) t.headers.insert(t.headers.begin() + (several ? 8 : 7), {"host MiB", "host vs baseline"});
  for (const RemedyRow& r : v.remedies) {
    t.rows.push_back({
        r.remedy,
        format_mib(r.peak_mib),
        format_signed_mib(r.peak_change_mib) + " (" + (r.peak_change_fraction > 0 ? "+" : "") +
            format_percent(r.peak_change_fraction, 1) + ")",
        format_mib(r.forward_increment_mib),
        format_mib(r.first_step_persistent_mib),
        format_mib(r.growth_per_step_mib),
        format_mib(r.final_reserved_mib),
        ms_cell(r),
        r.time_ratio ? format_times(*r.time_ratio) : "-",
        r.max_loss_diff ? format_percent(*r.max_loss_diff, 4) : "-",
        // With the cause's figures, as the best remedy's line gives them:
        // the forward column is the phase's increment, net of what the
        // loop held of the step before, and alone it read as a saving
        // that did not happen (an independent check's fixed leak, whose
        // forward made 214.2 MiB in both runs, showed 206.2 -> 142.2).
        r.status != RunStatus::kComplete
            ? to_string(r.status)
            : std::string(r.reduces_cause ? "yes" : "no") +
                  (r.cause_mib && r.baseline_cause_mib
                       ? " (" + (r.cause ? std::string(to_string(*r.cause)) + " " : std::string()) +
                             format_mib(*r.baseline_cause_mib) + " -> " + format_mib(*r.cause_mib) + ")"
                       : std::string()),
    });
    if (host) {
      const bool both = r.host_peak_mib && r.baseline_host_peak_mib;
      t.rows.back().insert(t.rows.back().begin() + 7,
                           {format_mib(r.host_peak_mib),
                            both ? format_signed_mib(*r.host_peak_mib - *r.baseline_host_peak_mib) : std::string("-")});
    }
    if (several) t.rows.back().insert(t.rows.back().begin() + 1, std::filesystem::path(r.baseline_source).filename().string());
    if (modes) {
      t.rows.back().push_back(format_mib(r.model_state_mib));
      t.rows.back().push_back(r.formula_mib ? format_mib(*r.formula_mib) : "-");
    }
  }
  return t;
}

std::optional<Table> sharded_capacity_table(const Verdict& v) {
  if (v.sharded_capacity.empty()) return std::nullopt;
  Table t;
  t.headers = {"mode", "ranks", "budget MiB", "model state MiB/rank", "batch per rank", "binds"};
  for (const ShardedCapacity& c : v.sharded_capacity) {
    const PhaseLine& b = c.answer.binding;
    std::string binds = to_string(b.phase);
    if (b.piece == PhaseLine::Piece::kNode) {
      binds += (b.phase == Phase::kForward ? " (span " : " (node ") + std::to_string(b.node) + ")";
    } else if (b.piece != PhaseLine::Piece::kWhole) {
      binds += b.piece == PhaseLine::Piece::kStart ? " (start)" : " (end)";
    }
    binds += ": " + format_mib(b.fixed_mib) + " + " + format_mib(b.per_sample_mib) + " per sample";
    t.rows.push_back({to_string(c.mode), std::to_string(c.world_size), format_mib(c.budget_mib), format_mib(c.model_state_mib),
                      c.answer.max_batch == 0 ? "none fits" : std::to_string(c.answer.max_batch), binds});
  }
  return t;
}

std::optional<Table> parallel_modes_table(const Verdict& v) {
  if (v.parallel_modes.empty()) return std::nullopt;
  Table t;
  t.headers = {"mode", "ranks", "weights MiB/rank", "formula", "model state MiB/rank", "formula",
               "forward MiB/rank", "peak MiB/rank", "max loss diff", "report"};
  for (const ModeRow& r : v.parallel_modes) {
    t.rows.push_back({r.mode == ParallelMode::kDdp ? std::string(to_string(r.mode)) : r.variant,
                      std::to_string(r.ranks) + "/" + std::to_string(r.world_size), format_mib(r.parameters_mib),
                      format_mib(r.parameters_formula_mib), format_mib(r.model_state_mib),
                      format_mib(r.model_state_formula_mib), format_mib(r.forward_increment_mib),
                      format_mib(r.peak_mib) + (r.status != RunStatus::kComplete ? " (" + std::string(to_string(r.status)) + ")" : ""),
                      r.max_loss_diff ? format_percent(*r.max_loss_diff, 4) : "-",
                      std::filesystem::path(r.source).filename().string()});
  }
  return t;
}

std::string describe_parallel_modes(const Verdict& v) {
  if (v.parallel_modes.empty()) return {};
  const ModeRow& base = v.parallel_modes.front();
  std::string s = "per rank under each parallel mode, rank 0's tensors at the end of the last step() against the "
                  "formulas (P the weights, N the ranks";
  if (base.parameters_formula_mib) s += ", P = " + format_mib(*base.parameters_formula_mib) + " MiB";
  if (base.model_state_formula_mib && base.parameters_formula_mib && *base.parameters_formula_mib > 0) {
    s += ", k = " + format_fixed(*base.model_state_formula_mib / *base.parameters_formula_mib - 2, 2) +
         " bytes of optimizer state per weight byte";
  }
  s += "): weights P replicated, P/N under zero3";
  bool tensor = false;
  for (const ModeRow& r : v.parallel_modes) {
    if (!definition(r.mode).splits_layers) continue;
    if (!tensor) s += ", P - S + S/N under tensor (S the split layers' weights";
    if (r.split_parameter_mib) s += (tensor ? ", " : " = ") + format_mib(*r.split_parameter_mib) + " MiB";
    tensor = true;
  }
  if (tensor) s += ")";
  s += "; model state (2+k)P replicated, 2P + kP/N zero1, P + (1+k)P/N zero2, (2+k)P/N zero3";
  if (tensor) s += ", (2+k)(P - S + S/N) tensor";
  s += "; forward: what a rank keeps for backward (tensor parallelism divides the activations between a pair's "
       "layers by N, zero3 none)";
  return s;
}

std::string describe_sharding(const Verdict& v) {
  std::vector<const RemedyRow*> rows;
  for (const RemedyRow& r : v.remedies) {
    if (is_sharded(r.mode) && r.remedies.empty()) rows.push_back(&r);
  }
  if (rows.empty()) return {};
  const std::string cause = to_string(v.dominant);
  std::string s = "sharding, per rank:";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RemedyRow& r = *rows[i];
    const ParallelModeDefinition& d = definition(r.mode);
    s += std::string(i ? ";" : "") + " " + r.remedy + " (" +
         (d.splits_layers       ? "the split layers' weights, gradients, optimizer state and activations"
          : d.shards_parameters ? "weights, gradients and optimizer state"
          : d.shards_gradients  ? "gradients and optimizer state"
                                : "optimizer state") +
         " divided among the ranks)";
    if (r.model_state_mib) {
      s += " holds " + format_mib(*r.model_state_mib) + " MiB of model state";
      if (r.formula_mib) s += " (its formula: " + format_mib(*r.formula_mib) + ")";
    }
    s += std::string(r.reduces_cause ? ", reduces " : ", does not reduce ") + cause;
    if (r.cause_mib && r.baseline_cause_mib) s += " (" + format_mib(*r.baseline_cause_mib) + " -> " + format_mib(*r.cause_mib) + " MiB)";
  }
  const std::vector<ParallelMode> answering = modes_answering(v.dominant);
  if (answering.empty()) {
    s += "; no mode divides " + cause + ": each rank keeps its own";
  }
  return s;
}

namespace {

// Offloading measured on the CPU: its lower peak moved memory within the
// same RAM, so the best remedy passes it over; said where it would have
// won (below `peak`).
std::string offloading_on_the_cpu(const Verdict& v, double peak) {
  std::string s;
  for (const RemedyRow& x : v.remedies) {
    if (x.host_is_device && x.reduces_cause && x.status == RunStatus::kComplete && x.peak_mib < peak) {
      s += ". " + x.remedy + "'s lower peak (" + format_mib(x.peak_mib) + " MiB, " +
           format_percent(x.peak_change_fraction, 1) +
           ") is not counted: on the CPU the host is the device, and what it moves leaves the tracked allocator, "
           "not the machine's memory";
    }
  }
  return s;
}

}  // namespace

namespace {

// A loss as a reader compares two: six significant digits.
std::string format_loss(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "losses differ by up to 4.07% of the baseline's largest (at the 6th loss
// compared: 2.30484 against 2.21465)": the two losses beside the share.
// Four decimals below 0.1%, where the tolerance (0.01%) is: 0.0133% read
// "0.01%", as if at the tolerance.
std::string loss_change(const RemedyRow& r) {
  std::string s = "losses differ by up to " + format_percent(*r.max_loss_diff, *r.max_loss_diff < 1e-3 ? 4 : 2) +
                  " of the baseline's largest";
  if (r.loss_diff_index && r.loss_at_diff && r.baseline_loss_at_diff) {
    const std::size_t n = *r.loss_diff_index + 1;
    const char* suffix = n % 100 >= 11 && n % 100 <= 13 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    s += " (at the " + std::to_string(n) + suffix + " loss compared: " + format_loss(*r.loss_at_diff) + " against " +
         format_loss(*r.baseline_loss_at_diff) + ")";
  }
  return s;
}

// "it trains fewer weights (gradients 42.37 -> 12.56 MiB)": frozen
// layers, whatever the losses have shown so far.
std::string fewer_weights(const RemedyRow& r) {
  std::string s = "it trains fewer weights (gradients " + format_mib(*r.baseline_gradients_mib) + " -> " +
                  format_mib(*r.gradients_mib) + " MiB";
  if (r.max_loss_diff) s += "; " + loss_change(r);
  return s + ")";
}

// "its weights are 16-bit where the baseline's are 32-bit (...)": the
// update rounded to the weights' precision, whatever the losses show.
std::string weights_16_bit(const RemedyRow& r) {
  std::string s = "its weights are 16-bit where the baseline's are 32-bit (" +
                  format_fixed(*r.baseline_bytes_per_parameter, 0) + " -> " + format_fixed(*r.bytes_per_parameter, 0) +
                  " bytes a parameter): each update is rounded to the weights' precision and those below it are lost, "
                  "which a few steps' losses do not show, unless the optimizer keeps an fp32 copy of the weights";
  if (r.max_loss_diff) s += " (" + loss_change(r) + ")";
  return s;
}

// Why a row changes what the model learns, where its figures say.
std::string learning_changed(const RemedyRow& r) {
  return r.gradients_mib ? fewer_weights(r) : r.bytes_per_parameter ? weights_16_bit(r) : loss_change(r);
}

// Where the variant computes in a lower precision with its weights kept
// (autocast): its losses are held to that precision's rounding.
std::string within_precision(const RemedyRow& r) {
  return "losses within " + format_percent(*r.max_loss_diff, 4) + " of the baseline's, inside " + r.precision +
         "'s rounding (" + format_percent(r.loss_tolerance, 2) + "): the arithmetic's precision changed, not what the "
         "model learns";
}

}  // namespace

std::string describe_best_remedy(const Verdict& v) {
  std::string s;
  // Where every row that reduces the cause changes what the model learns
  // there is no best (detail::best_remedy): the lowest peak is named, said
  // so.
  const std::optional<std::size_t> shown = v.best_remedy ? v.best_remedy : v.lowest_peak_remedy;
  if (!shown) {
    s = offloading_on_the_cpu(v, std::numeric_limits<double>::infinity());
    if (!s.empty()) s = "measured best remedy: none here" + s;
  } else {
    const RemedyRow& r = v.remedies[*shown];
    // Every row that reduces the cause changes what the model learns: the
    // best is only the lowest peak, and is not called a remedy that keeps
    // the training (an independent check's frozen backbone, 5,130 of 11.2M
    // weights trained, read "measured best remedy").
    const std::string head = r.changes_training ? "no measured remedy keeps what the model learns; the lowest peak: "
                                                : "measured best remedy: ";
    // A baseline that ran out of memory stopped before its peak: the remedy
    // that completes is the answer, whatever its peak against that one.
    s = r.baseline_status == RunStatus::kOom
            ? head + r.remedy + " completes where the baseline ran out of memory (peak " + format_mib(r.peak_mib) +
                  " MiB; the baseline had reached " + format_mib(r.baseline_peak_mib) + " MiB when it failed)"
            : head + r.remedy + " lowers the peak from " + format_mib(r.baseline_peak_mib) + " to " +
                  format_mib(r.peak_mib) + " MiB (" + format_percent(r.peak_change_fraction, 1) + ")";
    if (r.cause_mib && r.baseline_cause_mib) {
      s += ", " + std::string(to_string(r.cause.value_or(v.dominant))) + " " + format_mib(*r.baseline_cause_mib) +
           (r.baseline_cause_at_failure ? " MiB when the baseline failed" : "") + " -> " + format_mib(*r.cause_mib) + " MiB";
    }
    if (v.dominant == Cause::kActivations && r.reduces_cause && r.peak_phase && r.baseline_peak_phase &&
        *r.peak_phase != *r.baseline_peak_phase &&
        (*r.peak_phase == Phase::kStep || *r.peak_phase == Phase::kCleanup || *r.peak_phase == Phase::kOptimizerReady ||
         *r.peak_phase == Phase::kModelReady)) {
      // The peak left the phases that hold the activations: less of them
      // would not lower it.
      s += "; its peak is now " + std::string(to_string(*r.peak_phase)) + "'s, where the baseline's was " +
           to_string(*r.baseline_peak_phase) + "'s: less activations would not lower it further";
    }
    if (r.changes_training && (r.gradients_mib || r.bytes_per_parameter)) {
      s += "; it changes what the model learns: " + learning_changed(r);
    } else if (r.changes_training && r.max_loss_diff) {
      s += "; it changes what the model learns: " + loss_change(r) + ", beyond the " +
           format_percent(r.loss_tolerance, 2) + " tolerance";
    } else if (r.changes_training) {
      s += "; it changes what the model learns by design (the baseline has no losses to compare)";
    } else if (r.max_loss_diff && !r.precision.empty() && *r.max_loss_diff > thresholds::kLossTolerance) {
      s += "; " + within_precision(r);
    } else if (r.max_loss_diff) {
      s += "; losses within " + format_percent(*r.max_loss_diff, 4) + " of the baseline's";
    }
    if (r.time_ratio) s += "; " + format_times(*r.time_ratio) + " the time per step";
    if (v.lowest_peak_remedy && *v.lowest_peak_remedy != *shown) {
      const RemedyRow& low = v.remedies[*v.lowest_peak_remedy];
      s += ". The lowest peak overall is " + low.remedy + "'s (" + format_mib(low.peak_mib) + " MiB, " +
           format_percent(low.peak_change_fraction, 1) + ")" +
           (low.changes_training && (low.gradients_mib || low.bytes_per_parameter)
                ? ", but it changes what the model learns: " + learning_changed(low)
            : low.changes_training && low.max_loss_diff
                ? ", but it changes what the model learns: " + loss_change(low) + " (tolerance " +
                      format_percent(low.loss_tolerance, 2) + ")"
                : std::string());
    }
    s += offloading_on_the_cpu(v, r.peak_mib);
  }
  // Every other row that changes what the model learns, said in words, not
  // left to the table's loss column (an independent check's sgd, 4.07%
  // from AdamW's losses, was a number in a column only).
  std::string others;
  // Rows against several baselines (a sweep of batches, each with its
  // variants): each named with its baseline ("sgd; sgd; sgd" said nothing).
  std::set<std::string> baselines;
  for (const RemedyRow& x : v.remedies) baselines.insert(x.baseline_source);
  for (std::size_t i = 0; i < v.remedies.size(); ++i) {
    const RemedyRow& x = v.remedies[i];
    if (!x.changes_training || (!x.max_loss_diff && !x.gradients_mib && !x.bytes_per_parameter) ||
        (shown && i == *shown) ||
        (v.lowest_peak_remedy && i == *v.lowest_peak_remedy)) {
      continue;
    }
    others += std::string(others.empty() ? "" : "; ") + x.remedy +
              (baselines.size() > 1 ? " (against " + x.baseline_source + ")" : std::string()) + ", " +
              learning_changed(x);
  }
  if (!others.empty()) {
    s += std::string(s.empty() ? "changes what the model learns: " : ". Changes what the model learns too: ") + others;
  }
  return s;
}

namespace {

// The same change made in a PyTorch job of one's own, for reports that
// memory_diagnostics did not write (its flags cannot run them).
const char* change_in_a_job(RemedyKind k) {
  switch (k) {
    case RemedyKind::kCheckpoint: return "torch.utils.checkpoint around the model's blocks";
    case RemedyKind::kAccumulate: return "the batch in K micro-batches before one optimizer.step()";
    case RemedyKind::kBf16: return "the model and its inputs in torch.bfloat16";
    case RemedyKind::kAutocastBf16: return "torch.autocast(device_type, dtype=torch.bfloat16) around the forward";
    case RemedyKind::kEmptyCache: return "torch.cuda.empty_cache() after each step";
    case RemedyKind::kFixGraph: return "backward without retain_graph, and loss.item() where the loss is kept";
    case RemedyKind::kSgd: return "torch.optim.SGD in the optimizer's place";
    case RemedyKind::kEfficientAttention: return "torch.nn.functional.scaled_dot_product_attention for the attention";
    case RemedyKind::kStateBf16: return "the optimizer's exp_avg and exp_avg_sq kept in torch.bfloat16";
    case RemedyKind::kState8bit: return "an 8-bit optimizer (torchao.optim.AdamW8bit, bitsandbytes.optim.AdamW8bit)";
    case RemedyKind::kAdafactor: return "torch.optim.Adafactor in the optimizer's place";
    case RemedyKind::kOffloadState: return "torchao.optim.CPUOffloadOptimizer around the optimizer";
    case RemedyKind::kOffloadActivations: return "torch.autograd.graph.save_on_cpu(pin_memory=True) around the forward";
    case RemedyKind::kSplit: return "torch.cat([model(c) for c in torch.split(x, n // K)]) before one backward";
    case RemedyKind::kExpandableSegments: return "PYTORCH_ALLOC_CONF=expandable_segments:True";
    case RemedyKind::kMaxSplit: return "PYTORCH_ALLOC_CONF=max_split_size_mb:N";
    case RemedyKind::kGcThreshold: return "PYTORCH_ALLOC_CONF=garbage_collection_threshold:P";
    case RemedyKind::kRoundupPow2: return "PYTORCH_ALLOC_CONF=roundup_power2_divisions:N";
  }
  return "";
}

const char* change_in_a_job(ParallelMode m) {
  switch (m) {
    case ParallelMode::kZero1: return "torch.distributed.optim.ZeroRedundancyOptimizer";
    case ParallelMode::kZero2: return "FSDP with ShardingStrategy.SHARD_GRAD_OP";
    case ParallelMode::kZero3: return "FSDP (torch.distributed.fsdp.fully_shard)";
    case ParallelMode::kTensor:
      return "torch.distributed.tensor.parallel.parallelize_module with ColwiseParallel then RowwiseParallel for "
             "each pair of Linears";
    case ParallelMode::kNone:
    case ParallelMode::kDdp: return "";
  }
  return "";
}

}  // namespace

std::vector<std::string> remedies_not_measured(const Verdict& v) {
  std::vector<std::string> out;
  if (v.primary_producer != kProducerDiagnostics) {
    // A job of one's own: the change to make, recorded as a variant.
    for (RemedyKind k : v.remedies_not_measured) {
      out.emplace_back(std::string(to_string(k)) + " (in the job: " + change_in_a_job(k) + ")");
    }
    for (ParallelMode m : v.modes_not_measured) {
      out.emplace_back(std::string(to_string(m)) + " (in the job: " + change_in_a_job(m) + ")");
    }
    return out;
  }
  // Each with the flag that measures it, as a run accepts it: a remedy by
  // --remedy, a sharded mode by its flag under a launcher (refused outside).
  for (RemedyKind k : v.remedies_not_measured) {
    out.emplace_back(std::string(to_string(k)) + " (--remedy " + definition(k).syntax + ")");
  }
  for (ParallelMode m : v.modes_not_measured) {
    out.emplace_back(std::string(to_string(m)) + " (" + definition(m).flag +
                     " under a launcher: torchrun --nproc-per-node=N --no-python memory_diagnostics ...)");
  }
  return out;
}

Table ranks_table(const DistributedView& d) {
  Table t;
  t.headers = {"rank", "report", "peak MiB", "forward MiB", "1st-step excess MiB", ""};
  for (const RankRow& r : d.ranks) {
    t.rows.push_back({std::to_string(r.rank), std::filesystem::path(r.source).filename().string(),
                      format_mib(r.peak_allocated_mib), format_mib(r.forward_increment_mib),
                      format_mib(r.first_step_excess_mib), r.capacity_constraint ? "<- capacity constraint" : ""});
  }
  return t;
}

}  // namespace memdiag
