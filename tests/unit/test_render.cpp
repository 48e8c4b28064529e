// The renderers against golden files (words and layout exactly, figures as
// placeholders) and the JSON output's contract.
#include "memdiag/render.hpp"
#include "../../src/render/section.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/report_reader.hpp"

#include "golden.hpp"
#include "json_schema.hpp"
#include "process.hpp"
#include "synthetic.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace memdiag;
using testkit::Synth;
using testkit::synth;

using memdiag::testkit::expect_golden;

namespace {

// One rank of the same job (64 MiB of weights, AdamW) over two ranks in
// mode m, as it would measure: replicated, fully sharded (a half of every
// weight), or tensor parallel (63 of the 64 MiB in split layers, a half of
// them per rank, and a half of the 4 MiB of activations between a pair's
// layers).
Report mode_run(ParallelMode m, int rank) {
  const double p = 64, split = 63;
  Synth s;
  s.case_name = "modes";
  s.device = "cpu";
  s.rank = rank;
  s.world_size = 2;
  s.params_mib = parameters_per_rank(m, p, 2, m == ParallelMode::kTensor ? split : 0);
  s.activations_mib = m == ParallelMode::kTensor ? 8 - 4 / 2.0 : 8;
  s.optimizer_state_mib = 2 * s.params_mib;
  Report r = synth(s);
  r.config.parallel.mode = m;
  r.model.parameter_bytes = static_cast<std::int64_t>(p * kMiB);
  if (m == ParallelMode::kTensor) r.model.split_parameter_bytes = static_cast<std::int64_t>(split * kMiB);
  for (Sample& x : r.samples) {
    const bool stepped = x.phase == Phase::kStep || (x.step && *x.step > 0);
    x.tensors = TensorCensus{s.params_mib, x.phase == Phase::kStep || x.phase == Phase::kBackward ? s.params_mib : 0.0,
                             stepped ? 2 * s.params_mib : 0.0};
    if (x.phase == Phase::kStep) x.loss = 2.5 - 0.1 * *x.step + (m == ParallelMode::kTensor ? 1e-7 : 0.0);
  }
  return r;
}

// One group per kind of section: a lone activations report (confirming
// runs), a confirmed optimizer-state sweep, a retained graph, an inconclusive
// pair of causes, an imbalanced pair of ranks.
Analysis sample_analysis() {
  std::vector<std::pair<std::string, Report>> reports;
  Synth act;
  act.case_name = "mycase";
  act.activations_mib = 100;
  reports.emplace_back("dir/run.json", synth(act));
  for (double p : {16.0, 64.0}) {
    Synth s;
    s.case_name = "state";
    s.device = "cpu";
    s.params_mib = p;
    s.optimizer_state_mib = 2 * p;
    s.preset = p < 20 ? "small" : "medium";
    reports.emplace_back("state-" + s.preset + ".json", synth(s));
  }
  Synth leak;
  leak.case_name = "leak";
  leak.activations_mib = 5;
  leak.retained_per_step_mib = 5;
  leak.steps = 6;
  reports.emplace_back("leak.json", synth(leak));
  Synth close;
  close.case_name = "close";
  close.activations_mib = 20;
  close.optimizer_state_mib = 20;
  reports.emplace_back("close.json", synth(close));
  for (int r : {0, 1}) {
    Synth s;
    s.case_name = "ranks";
    s.rank = r;
    s.world_size = 2;
    s.activations_mib = r == 0 ? 60 : 40;
    reports.emplace_back("ranks-" + std::to_string(r) + ".json", synth(s));
  }
  for (ParallelMode m : {ParallelMode::kDdp, ParallelMode::kZero3, ParallelMode::kTensor}) {
    for (int r : {0, 1}) reports.emplace_back(std::string(to_string(m)) + "-" + std::to_string(r) + ".json", mode_run(m, r));
  }
  return analyse(reports);
}

}  // namespace

TEST(Render, TextMatchesGolden) { expect_golden("compare.txt", render_text(Comparison{sample_analysis()})); }

TEST(Render, MarkdownMatchesGolden) { expect_golden("compare.md", render_markdown(Comparison{sample_analysis()})); }

namespace {

// The words a browser shows: tags, the style sheet and the plots' SVG
// markup dropped, entities decoded, a line per text node.
std::string html_text(const std::string& html) {
  std::string text, out;
  bool tag = false, skip = false;
  for (std::size_t i = 0; i < html.size(); ++i) {
    if (html.compare(i, 6, "<style") == 0) skip = true;
    if (html.compare(i, 8, "</style>") == 0) skip = false;
    if (html[i] == '<') {
      tag = true;
      text += '\n';
      continue;
    }
    if (html[i] == '>') {
      tag = false;
      continue;
    }
    if (!tag && !skip) text += html[i];
  }
  for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (auto at = text.find(entity); at != std::string::npos; at = text.find(entity, at + c.size())) {
      text.replace(at, entity.size(), c);
    }
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t");
    if (b != std::string::npos) out += line.substr(b, e - b + 1) + "\n";
  }
  return out;
}

}  // namespace

TEST(Render, HtmlSaysEverythingTheTextSays) {
  const Analysis a = sample_analysis();
  const std::string text = html_text(render_html(Comparison{a}));
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const detail::Section s = detail::section_of(a.groups[i], a.verdicts[i]);
    std::vector<std::string> said = {s.title, s.label, s.response};
    for (const auto* list : {&s.evidence, &s.warnings, &s.not_helpful, &s.capacity}) {
      said.insert(said.end(), list->begin(), list->end());
    }
    if (!s.decision.empty()) said.push_back(s.decision);
    for (const std::string& c : s.commands) said.push_back("$ " + c);
    for (const auto& row : s.runs.rows) said.insert(said.end(), row.begin(), row.end());
    for (const std::string& w : said) EXPECT_NE(text.find(w), std::string::npos) << s.title << ": " << w;
    if (s.title.rfind("ranks", 0) == 0) {
      EXPECT_FALSE(s.warnings.empty());
      EXPECT_NE(text.find("imbalanced"), std::string::npos);  // the warning the HTML used to drop
    }
  }
  expect_golden("compare.html.txt", text);
}

TEST(Render, AnotherProducersConfirmingRunsAreChangesInEveryFormat) {
  Synth s;
  s.case_name = "my-loop";
  s.activations_mib = 100;
  Report r = synth(s);
  r.producer = Producer{kProducerRecorder, "x"};
  r.case_info.builtin = false;
  const Analysis a = analyse({{"loop.json", r}});
  const std::string heading =
      "to confirm, record the job again (memdiag::Recorder wrote the report; memory_diagnostics cannot run it):";
  const std::string text = render_text(Comparison{a});
  EXPECT_NE(text.find(heading + "\n  - with batch 1 per device (expected: peak about "), std::string::npos) << text;
  EXPECT_NE(text.find("\n  - with batch 4 per device (expected: peak about "), std::string::npos) << text;
  EXPECT_EQ(text.find("memory_diagnostics --case"), std::string::npos) << text;
  EXPECT_NE(render_markdown(Comparison{a}).find("- with batch 4 per device"), std::string::npos);
  EXPECT_NE(html_text(render_html(Comparison{a})).find("with batch 1 per device"), std::string::npos);
  const auto runs = comparison_json(Comparison{a})["groups"][0]["confirming_runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["runnable"], false);
  EXPECT_TRUE(runs[0]["argv"].is_null());
  EXPECT_EQ(runs[0]["change"], "with batch 1 per device");
  // What each is expected to cost, from the report's own figures: smaller
  // batches, smaller peaks, all below the report's; the steps no longer
  // than the report's (a bound, said as one).
  const double peak = a.groups[0].runs[0].peak_allocated_mib;
  const double at1 = runs[0]["expected"]["peak_mib"], at4 = runs[1]["expected"]["peak_mib"];
  EXPECT_LT(at1, at4);
  EXPECT_LT(at4, peak);
  EXPECT_GT(at1, a.groups[0].runs[0].parameter_mib);
  EXPECT_TRUE(runs[0]["expected"]["seconds_at_most"].get<bool>());
  EXPECT_NE(runs[0]["expected"]["text"].get<std::string>().find("at most"), std::string::npos);
}

TEST(Render, JsonMatchesGolden) {
  nlohmann::json j = comparison_json(Comparison{sample_analysis()});
  j["memdiag_version"] = "VERSION";
  expect_golden("compare.json", j.dump(1) + "\n");
}

// The same job replicated, under ZeRO-3 and tensor parallel: one table,
// per rank, the replicated run first, each mode's weights and model state
// beside its formula, in every format.
TEST(Render, ParallelModesSideBySidePerRankInEveryFormat) {
  const Analysis a = sample_analysis();
  std::size_t g = 0;
  while (g < a.verdicts.size() && a.verdicts[g].case_name != "modes") ++g;
  ASSERT_LT(g, a.verdicts.size());
  const Verdict& v = a.verdicts[g];
  ASSERT_EQ(v.parallel_modes.size(), 3u);
  const std::vector<ParallelMode> order = {ParallelMode::kDdp, ParallelMode::kZero3, ParallelMode::kTensor};
  for (std::size_t i = 0; i < 3; ++i) {
    const ModeRow& r = v.parallel_modes[i];
    EXPECT_EQ(r.mode, order[i]);
    EXPECT_EQ(r.ranks, 2);
    ASSERT_TRUE(r.parameters_mib && r.parameters_formula_mib && r.model_state_mib && r.model_state_formula_mib);
    EXPECT_NEAR(*r.parameters_mib, *r.parameters_formula_mib, 1e-9) << to_string(r.mode);
    EXPECT_NEAR(*r.model_state_mib, *r.model_state_formula_mib, 1e-9) << to_string(r.mode);
  }
  // Tensor: P - S + S/N of the weights, four times that of model state.
  EXPECT_NEAR(*v.parallel_modes[2].parameters_formula_mib, 64 - 63 + 63 / 2.0, 1e-9);
  EXPECT_NEAR(*v.parallel_modes[2].model_state_formula_mib, 4 * (64 - 63 + 63 / 2.0), 1e-9);
  EXPECT_LT(*v.parallel_modes[2].forward_increment_mib, *v.parallel_modes[0].forward_increment_mib);
  const std::string text = render_text(Comparison{a}), md = render_markdown(Comparison{a}),
                    html = html_text(render_html(Comparison{a}));
  const std::string note = describe_parallel_modes(v);
  EXPECT_NE(text.find(note + ":\n  mode "), std::string::npos) << text;
  for (const char* row : {"\n  ddp ", "\n  zero3 ", "\n  tensor "}) EXPECT_NE(text.find(row), std::string::npos) << row;
  for (const char* row : {"| ddp |", "| zero3 |", "| tensor |"}) EXPECT_NE(md.find(row), std::string::npos) << row;
  EXPECT_NE(html.find("per rank under each parallel mode\n"), std::string::npos);
  EXPECT_NE(html.find("tensor\n2/2\n"), std::string::npos) << html;
  const nlohmann::json rows = comparison_json(Comparison{a})["groups"][g]["parallel_modes"]["rows"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]["mode"], "tensor");
  EXPECT_NEAR(rows[2]["split_parameter_mib"].get<double>(), 63, 1e-9);
  // Without a replicated run beside them, no table.
  std::vector<std::pair<std::string, Report>> alone;
  for (int r : {0, 1}) alone.emplace_back("tensor-" + std::to_string(r) + ".json", mode_run(ParallelMode::kTensor, r));
  const Analysis b = analyse(alone);
  EXPECT_TRUE(b.verdicts[0].parallel_modes.empty());
  EXPECT_TRUE(comparison_json(Comparison{b})["groups"][0]["parallel_modes"].is_null());
}

TEST(Render, GoldenMatchingCatchesAChangedWord) {
  EXPECT_TRUE(testkit::golden_mismatches("peak %float MiB (%int steps)\n", "peak 12.5 MiB (3 steps)\n").empty());
  EXPECT_EQ(testkit::golden_mismatches("peak %float MiB\n", "top 12.5 MiB\n").size(), 1u);
  EXPECT_EQ(testkit::golden_mismatches("a\nb\n", "a\n").size(), 1u);
  EXPECT_EQ(testkit::golden_mismatches("x (y)\n", "x (y)\n").size(), 0u);
}

TEST(Render, JsonCarriesTheSentencesAndTheRecordsBehindThem) {
  const std::vector<InputError> unreadable{InputError("bad.json", "$.status", "unknown status")};
  const nlohmann::json j = comparison_json(Comparison{sample_analysis(), {}, unreadable});
  EXPECT_EQ(j["schema_version"], kComparisonSchemaVersion);
  EXPECT_DOUBLE_EQ(j["thresholds"]["dominance_ratio"].get<double>(), thresholds::kDominanceRatio);
  const auto& g = j["groups"][0];
  EXPECT_EQ(g["case"], "mycase");
  EXPECT_EQ(g["dominant_cause"], "activations");
  EXPECT_EQ(g["decision"]["rule"], "dominant");
  EXPECT_EQ(g["decision"]["top"]["cause"], "activations");
  ASSERT_EQ(g["evidence"].size(), g["evidence_data"].size());
  EXPECT_EQ(g["evidence_data"][0]["code"], "forward_increment");
  EXPECT_DOUBLE_EQ(g["evidence_data"][0]["forward_mib"].get<double>(), 100.0);
  EXPECT_EQ(g["evidence_data"][0]["text"], g["evidence"][0]);
  EXPECT_TRUE(g["response"].is_string());
  ASSERT_EQ(g["confirming_runs"].size(), 2u);
  const auto& run = g["confirming_runs"][0];
  EXPECT_EQ(run["confirms"], "batch");
  EXPECT_EQ(run["argv"][0], "memory_diagnostics");
  EXPECT_EQ(run["command"], g["confirm"][0]);
  EXPECT_EQ(run["output"], "dir/mycase-batch1.json");
  EXPECT_EQ(g["runs"][0]["source"], "dir/run.json");
  EXPECT_EQ(j["errors"][0]["path"], "$.status");
  bool saw_warning = false;
  for (const auto& grp : j["groups"]) {
    for (const auto& w : grp["warning_data"]) {
      saw_warning = true;
      EXPECT_EQ(w["code"], "rank_imbalance");
      EXPECT_EQ(w["max_rank"], 0);
    }
  }
  EXPECT_TRUE(saw_warning);
  const auto errors = testkit::validate(testkit::load_json(MEMDIAG_COMPARISON_SCHEMA_FILE), j);
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(Render, ComparisonSchemaRejectsWhatItForbids) {
  nlohmann::json j = comparison_json(Comparison{sample_analysis()});
  j["groups"][0]["dominant_cause"] = "gremlins";
  j["groups"][0]["confirming_runs"][0].erase("argv");
  j["groups"][0]["surprise"] = true;
  EXPECT_EQ(testkit::validate(testkit::load_json(MEMDIAG_COMPARISON_SCHEMA_FILE), j).size(), 3u)
      << testkit::validate(testkit::load_json(MEMDIAG_COMPARISON_SCHEMA_FILE), j).front();
}

TEST(Render, TableAlignsColumns) {
  Table t{{"name", "value"}, {{"a", "1.0"}, {"longer", "100.25"}}};
  EXPECT_EQ(t.to_text(), "name     value\na          1.0\nlonger  100.25\n");
}

TEST(Render, JunitEscapesWhatReportsCarry) {
  Analysis a;
  GateCheck g;
  g.case_name = "bad\x1b[31m<&>\"\xff";
  g.cause = Cause::kActivations;
  const std::vector<GateCheck> gates{g};
  const std::string xml = render_junit(Comparison{a, {}, {}, gates});
  EXPECT_EQ(xml.find('\x1b'), std::string::npos);
  EXPECT_EQ(xml.find('\xff'), std::string::npos);
  EXPECT_NE(xml.find("bad\xEF\xBF\xBD[31m&lt;&amp;&gt;&quot;\xEF\xBF\xBD"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure message=\"no report of case"), std::string::npos) << xml;
}

// "Not measured here" names, for every remedy and sharded mode, the flag
// that measures it as memory_diagnostics accepts it (--remedy's syntax, the
// mode's own flag under a launcher), never "--remedy shard-optimizer-state",
// which the parser refuses.
TEST(Render, EveryRemedyNotMeasuredNamesTheFlagThatMeasuresIt) {
  std::vector<std::pair<std::string, Report>> reports;
  Synth s;
  s.activations_mib = 40;
  reports.emplace_back("r.json", synth(s));
  Analysis a = analyse(reports);
  ASSERT_EQ(a.verdicts.size(), 1u);
  Verdict& v = a.verdicts[0];
  v.remedies.push_back(RemedyRow{});  // a remedy table exists, so the line is shown
  v.remedies_not_measured = all_values<RemedyKind>();
  v.modes_not_measured.clear();
  for (ParallelMode m : all_values<ParallelMode>()) {
    if (is_sharded(m)) v.modes_not_measured.push_back(m);
  }
  ASSERT_FALSE(v.modes_not_measured.empty());
  const std::string text = render_text(Comparison{a}), md = render_markdown(Comparison{a});
  for (RemedyKind k : all_values<RemedyKind>()) {
    const std::string want = std::string("--remedy ") + definition(k).syntax;
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
    EXPECT_NE(md.find(want), std::string::npos) << want;
  }
  for (ParallelMode m : v.modes_not_measured) {
    EXPECT_NE(text.find(std::string(definition(m).flag) + " under a launcher"), std::string::npos) << text;
    EXPECT_EQ(text.find(std::string("--remedy ") + to_string(m)), std::string::npos) << text;
  }
}

// A "would not help" about a remedy that was measured says what it did
// where it lowered the peak beyond kRemedyReduction: the source's splitting
// leaves the activations saved yet shrinks backward's temporaries, so a
// report must not say it does not help beside a table that shows -21%.
// Below the threshold, or for a remedy not measured, the sentence stands.
TEST(Render, AWouldNotHelpSaysWhatItsRemedyMeasured) {
  Synth s;
  s.activations_mib = 40;
  Analysis a = analyse({{"r.json", synth(s)}});
  ASSERT_EQ(a.verdicts.size(), 1u);
  Verdict& v = a.verdicts[0];
  ASSERT_EQ(v.dominant, Cause::kActivations);
  const auto split_line = [](const std::vector<std::string>& lines) {
    for (const std::string& n : lines) {
      if (n.rfind("Splitting the batch", 0) == 0) return n;
    }
    return std::string();
  };
  const std::string plain = split_line(not_helpful_for(v));
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.find("Measured here"), std::string::npos) << plain;
  RemedyRow row;
  row.remedy = "split=4";
  row.remedies = {Remedy{RemedyKind::kSplit, 4}};
  row.baseline_peak_mib = 68.85;
  row.peak_mib = 54.23;
  row.peak_change_mib = row.peak_mib - row.baseline_peak_mib;
  row.peak_change_fraction = row.peak_change_mib / row.baseline_peak_mib;
  row.cause_mib = 36.78;
  row.baseline_cause_mib = 36.78;
  v.remedies.push_back(row);
  const std::string said = split_line(not_helpful_for(v));
  EXPECT_NE(said.find("Measured here, split=4 lowers the peak by 21.2% (68.85 -> 54.23 MiB), but not activations "
                      "(36.78 -> 36.78 MiB): what it saves is elsewhere."),
            std::string::npos)
      << said;
  // The same line in every format.
  const std::string text = render_text(Comparison{a}), md = render_markdown(Comparison{a});
  EXPECT_NE(text.find("Measured here, split=4"), std::string::npos);
  EXPECT_NE(md.find("Measured here, split=4"), std::string::npos);
  EXPECT_NE(comparison_json(Comparison{a})["groups"][0]["not_helpful"].dump().find("Measured here, split=4"),
            std::string::npos);
  // Within the threshold: the sentence alone.
  v.remedies[0].peak_mib = 0.95 * row.baseline_peak_mib;
  v.remedies[0].peak_change_fraction = -0.05;
  EXPECT_EQ(split_line(not_helpful_for(v)).find("Measured here"), std::string::npos);
}

// "The post-cleanup allocation is stable" is said only where a trend over
// cleanups measured it: a library job that ran out of memory in step 0
// (ResNet-50 at batch 256 under 16384 MiB) had no cleanup to read, and its
// would-not-help called the allocation stable all the same.
TEST(Render, AStableAllocationIsClaimedOnlyWhereItWasMeasured) {
  Synth s;
  s.steps = 4;
  s.activations_mib = 40;
  Analysis a = analyse({{"r.json", synth(s)}});
  ASSERT_EQ(a.verdicts.size(), 1u);
  Verdict& v = a.verdicts[0];
  ASSERT_EQ(v.dominant, Cause::kActivations);
  const auto claims = [&] {
    for (const std::string& n : not_helpful_for(v)) {
      if (n.find("post-cleanup allocation is stable") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(claims());  // four cleanups, none grew
  const auto trend = std::find_if(v.evidence.begin(), v.evidence.end(), [](const Evidence& e) {
    return std::holds_alternative<evidence::PostCleanupTrend>(e);
  });
  ASSERT_NE(trend, v.evidence.end());
  std::get<evidence::PostCleanupTrend>(*trend).growth_per_step_mib.reset();  // one cleanup: no trend
  EXPECT_FALSE(claims());
  v.evidence.erase(trend);  // none at all: it ran out before a cleanup
  EXPECT_FALSE(claims());
}

// The kept line says where a tensor was allocated where the allocator's
// stack said it (CUDA), beside the call that made it, once where the two
// are one line; a module's output with no line of the loop's is no longer
// put down to a hook where the allocation's line is known.
TEST(Render, AKeptTensorSaysTheLineThatAllocatedIt) {
  KeptRecord k;
  k.shape = {32, 64};
  k.dtype = "int64";
  k.device = "cuda";
  k.per_step = 1;
  k.mib_per_step = 0.02;
  evidence::KeptAcrossSteps x;
  x.kept = {k};
  EXPECT_EQ(describe(Evidence{x}).find("allocated at"), std::string::npos);
  x.kept[0].allocated_at = "train.py:57";
  EXPECT_NE(describe(Evidence{x}).find("1 tensor (32 x 64 int64, 0.020 MiB each step, outside any graph, allocated at "
                                       "train.py:57)"),
            std::string::npos)
      << describe(Evidence{x});
  x.kept[0].made_by = "output of module head (Linear)";
  EXPECT_EQ(describe(Evidence{x}).find("a forward hook"), std::string::npos) << describe(Evidence{x});
  x.kept[0].allocated_at.reset();
  EXPECT_NE(describe(Evidence{x}).find("a forward hook"), std::string::npos) << describe(Evidence{x});
  x.kept[0].made_by = "logits of Net";
  x.kept[0].where = "train.py:40";
  x.kept[0].allocated_at = "model.py:12";
  EXPECT_NE(describe(Evidence{x}).find("from the call at train.py:40, allocated at model.py:12)"), std::string::npos)
      << describe(Evidence{x});
  x.kept[0].allocated_at = "train.py:40";
  EXPECT_EQ(describe(Evidence{x}).find("allocated at"), std::string::npos) << describe(Evidence{x});
}

// A sharded model whose forward holds most of its weights gathered to
// backward (FSDP2 on the root alone) is told to shard by block, not to
// shard; one whose forward holds a block's worth keeps the general words.
TEST(Render, AShardedModelHoldingItsWeightsGatheredIsToldToShardByBlock) {
  Verdict v;
  v.dominant = Cause::kParameters;
  v.primary_mode = ParallelMode::kZero3;
  v.primary_world_size = 2;
  evidence::WeightsDominate w;
  w.parameter_mib = 70.26;
  w.peak_mib = 458.2;
  w.gathered_mib = 140.5;
  v.evidence = {Evidence{w}};
  std::string r = response_for(v);
  EXPECT_NE(r.find("sharded already (zero3 over 2 ranks), but its forward gathers 140.5 MiB"), std::string::npos) << r;
  EXPECT_NE(r.find("call fully_shard on each block"), std::string::npos) << r;
  EXPECT_NE(describe(Evidence{w}).find("besides this rank's shard, the forward gathers 140.5 MiB"), std::string::npos)
      << describe(Evidence{w});
  w.gathered_mib = 2.2;  // a block's worth
  v.evidence = {Evidence{w}};
  r = response_for(v);
  EXPECT_EQ(r.find("fully_shard on each block"), std::string::npos) << r;
  w.gathered_mib = 140.5;  // replicated weights are not "sharded already"
  v.evidence = {Evidence{w}};
  v.primary_mode = ParallelMode::kDdp;
  EXPECT_EQ(response_for(v).find("sharded already"), std::string::npos) << response_for(v);
}

// Kept outputs are told to the host on CUDA; on the CPU the host is where
// they are, and .cpu() is the same tensor: a reduced value is the fix (an
// independent check's CPU job was told to store x.detach().cpu()).
TEST(Render, KeptOutputsOnTheCpuAreToldToKeepLessNotToMoveToTheHost) {
  Verdict v;
  v.dominant = Cause::kRetainedGraph;
  KeptRecord k;
  k.shape = {8, 64, 8000};
  k.dtype = "float32";
  k.per_step = 1;
  k.mib_per_step = 15.62;
  k.made_by = "logits of GPT2LMHeadModel";
  for (const bool attached : {true, false}) {
    if (attached) k.grad_fn = "UnsafeViewBackward0";
    else k.grad_fn.reset();
    evidence::KeptAcrossSteps x;
    x.kept = {k};
    v.evidence = {Evidence{x}};
    v.primary_device_kind = "cuda";
    const std::string cuda = response_for(v);
    EXPECT_NE(cuda.find(".cpu()"), std::string::npos) << cuda;
    EXPECT_EQ(cuda.find("on the CPU"), std::string::npos) << cuda;
    v.primary_device_kind = "cpu";
    const std::string cpu = response_for(v);
    EXPECT_NE(cpu.find("on the CPU .cpu() is the same tensor"), std::string::npos) << cpu;
    EXPECT_NE(cpu.find(".item()"), std::string::npos) << cpu;
    EXPECT_EQ(cpu.find("store x.detach().cpu()"), std::string::npos) << cpu;
  }
}

// Weights dominant with as much again held before training began (an EMA
// copy of a 64 MiB model): the response names the copy's own fix, for the
// device the run was on; a small remainder gets the plain response.
TEST(Render, ACopyOfTheModelHeldBeforeTrainingGetsItsOwnFix) {
  Verdict v;
  v.dominant = Cause::kParameters;
  v.primary_device_kind = "cuda";
  v.evidence = {Evidence{evidence::HeldBeforeTraining{64.11, 64.11, true, 0, {}}}};
  const std::string cuda = response_for(v);
  EXPECT_EQ(cuda.rfind(cause_response(Cause::kParameters), 0), 0u) << cuda;
  EXPECT_NE(cuda.find("AveragedModel(model, device=\"cpu\")"), std::string::npos) << cuda;
  v.primary_device_kind = "cpu";
  v.evidence = {Evidence{evidence::HeldBeforeTraining{64.11, 64.11, false, 0, {}}}};
  EXPECT_EQ(response_for(v).find("on the host"), std::string::npos) << response_for(v);
  EXPECT_EQ(describe(v.evidence[0]).find("cuBLAS"), std::string::npos) << describe(v.evidence[0]);
  v.evidence = {Evidence{evidence::HeldBeforeTraining{10.0, 64.11, false, 0, {}}}};
  EXPECT_EQ(response_for(v), cause_response(Cause::kParameters));
  // The model's own buffers (MoCo's queue of past keys, an independent
  // check's: "another model's weights" for the model's own state): named,
  // and no copy of the model where they are what was held.
  v.evidence = {Evidence{evidence::HeldBeforeTraining{64.11, 64.11, false, 64.0, {{"queue", 64.0}, {"ptr", 0.0}}}}};
  EXPECT_EQ(response_for(v), cause_response(Cause::kParameters));
  std::string text = describe(v.evidence[0]);
  EXPECT_NE(text.find("the model's own buffers (queue 64.00 MiB), state its modules keep that is no parameter"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("EMA"), std::string::npos) << text;
  // Buffers beside a copy: both said, the copy's fix for what the buffers leave.
  v.evidence = {Evidence{evidence::HeldBeforeTraining{80.0, 64.11, false, 16.0, {{"queue", 16.0}}}}};
  text = describe(v.evidence[0]);
  EXPECT_NE(text.find("16.00 MiB of it the model's own buffers (queue 16.00 MiB)"), std::string::npos) << text;
  EXPECT_NE(text.find("; the rest another model's weights"), std::string::npos) << text;
  EXPECT_NE(response_for(v).find("And the 64.00 MiB held before training began beyond the model's buffers"),
            std::string::npos) << response_for(v);
}

// Optimizer state of three buffers a parameter, measured (3.00x the
// weights): the response says which settings make the third.
TEST(Render, ThreeBuffersAParameterAreSaidWhichSettingsMakeThem) {
  Verdict v;
  v.dominant = Cause::kOptimizerState;
  evidence::OptimizerStateMade m;
  m.persistent_mib = 192.3;
  m.left_mib = 192.3;
  m.parameter_mib = 64.11;
  m.ratio_to_parameters = 3.0;
  m.state_counted = true;
  v.evidence = {Evidence{m}};
  EXPECT_NE(response_for(v).find("centered=True and momentum"), std::string::npos) << response_for(v);
  // No census: the 3.00x is all the first step left (Adam's two moments
  // and gradients held through the cleanup read the same).
  m.state_counted = false;
  v.evidence = {Evidence{m}};
  EXPECT_EQ(response_for(v), cause_response(Cause::kOptimizerState));
  m.state_counted = true;
  m.ratio_to_parameters = 2.0;  // Adam's two moments: the general response
  v.evidence = {Evidence{m}};
  EXPECT_EQ(response_for(v), cause_response(Cause::kOptimizerState));
}

// A loss kept after its backward (a scalar, its saved tensors freed) is
// named in the evidence, but beside another cause the response adds no
// "the loop keeps memory across steps" for 0.00 MiB (an independent
// check's deque of losses); a kept tensor of some size still gets it.
TEST(Render, AKeptScalarGetsNoFixBesideAnotherCause) {
  Verdict v;
  v.dominant = Cause::kActivations;
  v.primary_device_kind = "cuda";
  KeptRecord k;
  k.dtype = "float32";
  k.per_step = 1;
  k.grad_fn = "AddBackward0";
  k.mib_per_step = 0.0000038;
  evidence::KeptAcrossSteps x;
  x.kept = {k};
  v.evidence = {Evidence{x}};
  EXPECT_EQ(response_for(v), cause_response(Cause::kActivations));
  k.mib_per_step = 0.5;
  k.shape = {16, 1000};
  x.kept = {k};
  v.evidence = {Evidence{x}};
  EXPECT_NE(response_for(v).find("Besides, the loop keeps memory across steps"), std::string::npos) << response_for(v);
}

// A loop that holds the last step's graph until the next forward replaces
// it (backward(retain_graph=True), outputs kept in a variable) ends the
// forward's phase near 0 while the forward makes as much as step 0's: the
// figure said, the inputs weighed and checkpointing's reach are what it
// makes (a Mistral read "forward adds 0.00 MiB" beside "3.95 MiB per
// sample", and was told its 2 KiB of token ids outweighed it).
TEST(Render, AForwardThatFreesTheLastStepsGraphIsWeighedByWhatItMakes) {
  Verdict v;
  v.dominant = Cause::kActivations;
  evidence::ForwardIncrement f;
  f.forward_mib = 0.0;
  f.held_over_mib = 15.82;
  f.per_sample_mib = 3.955;
  f.input_mib = 0.002;
  f.at.batch = 4;
  v.evidence.push_back(f);
  const std::string line = describe(v.evidence[0]);
  EXPECT_EQ(line.rfind("forward makes 15.82 MiB per step", 0), 0u) << line;
  EXPECT_NE(line.find("its phase ends only 0.00 MiB up"), std::string::npos) << line;
  EXPECT_EQ(line.find("more than the forward makes"), std::string::npos) << line;
  EXPECT_EQ(response_for(v).find("inputs the forward is given"), std::string::npos) << response_for(v);
  for (const std::string& n : not_helpful_for(v)) {
    EXPECT_EQ(n.find("0.00 MiB the forward makes"), std::string::npos) << n;
  }
  // What the loop held past the cleanup no larger than its inputs is the
  // inputs (the last batch, until the next replaces it): the forward makes
  // its phase's figure, and the inputs outweigh it.
  std::get<evidence::ForwardIncrement>(v.evidence[0]).input_mib = 20.0;
  EXPECT_NE(response_for(v).find("more than the 0.00 MiB it makes"), std::string::npos) << response_for(v);
  EXPECT_EQ(describe(v.evidence[0]).rfind("forward adds 0.00 MiB per step", 0), 0u) << describe(v.evidence[0]);
}

// ZeRO-1 whose state landed unevenly (one large parameter's state whole on
// one rank) is not told that more ranks divide it further.
TEST(Render, UnevenZeroOneStateIsNotToldMoreRanksDivideIt) {
  Verdict v;
  v.dominant = Cause::kOptimizerState;
  v.primary_mode = ParallelMode::kZero1;
  v.primary_world_size = 2;
  RankRow r0, r1;
  r0.rank = 0;
  r0.first_step_excess_mib = 31.25;
  r1.rank = 1;
  r1.first_step_excess_mib = 1.58;
  v.uneven_state = Verdict::UnevenState{r0, r1};  // as the analysis finds it
  std::string r = response_for(v);
  EXPECT_NE(r.find("by whole parameters and unevenly: rank 0 keeps 31.25 MiB"), std::string::npos) << r;
  EXPECT_EQ(r.find("more ranks divide it further"), std::string::npos) << r;
  v.uneven_state.reset();  // even: the general words
  r = response_for(v);
  EXPECT_NE(r.find("more ranks divide it further"), std::string::npos) << r;
}

// Ranks the Python recorder read on the CPU may differ by what the
// profiler missed (frees in Gloo's threads): an imbalance there says so.
TEST(Render, AnImbalanceOfCpuRecordedRanksSaysTheReadingsMayOverstate) {
  warning::RankImbalance w;
  w.imbalance = 0.12;
  w.max_peak_mib = 119.6;
  EXPECT_EQ(describe(Warning{w}).find("recorded on the CPU"), std::string::npos) << describe(Warning{w});
  w.cpu_readings_overstate = true;
  EXPECT_NE(describe(Warning{w}).find("recorded on the CPU, where PyTorch's profiler misses the frees"),
            std::string::npos)
      << describe(Warning{w});
}

// Two consumers within the margin: the response names the one run that
// tells them apart and what it will show, by the pair; a tie no single run
// settles keeps the general response.
TEST(Render, ATieNamesTheOneRunThatTellsItsPairApart) {
  Verdict v;
  v.dominant = Cause::kInconclusive;
  v.decision.rule = DecisionRule::kTooClose;
  const auto response = [&](Cause a, Cause b) {
    v.decision.top = Component{a, 120.0};
    v.decision.runner_up = Component{b, 100.0};
    return response_for(v);
  };
  std::string r = response(Cause::kActivations, Cause::kAllocatorCache);
  EXPECT_EQ(tied_pair_test(v.decision), TiedPairTest::kExpandableSegments);
  EXPECT_NE(r.find("activations (120.0 MiB) and allocator_cache (100.0 MiB) are too close"), std::string::npos) << r;
  EXPECT_NE(r.find("under expandable segments tells them apart"), std::string::npos) << r;
  EXPECT_NE(r.find(", activations does not."), std::string::npos) << r;
  r = response(Cause::kRetainedGraph, Cause::kActivations);
  EXPECT_EQ(tied_pair_test(v.decision), TiedPairTest::kLongerRun);
  // Held and bounded (a cache of the last steps' tensors): a longer run
  // shows nothing more; the batch tells it from the activations.
  v.decision.retained_bounded = true;
  EXPECT_EQ(tied_pair_test(v.decision), TiedPairTest::kSmallerBatch);
  v.decision.retained_bounded = false;
  r = response(Cause::kRetainedGraph, Cause::kActivations);
  EXPECT_NE(r.find("the longer run below tells them apart"), std::string::npos) << r;
  EXPECT_NE(r.find(", activations does not."), std::string::npos) << r;
  r = response(Cause::kOptimizerState, Cause::kActivations);
  EXPECT_EQ(tied_pair_test(v.decision), TiedPairTest::kSmallerBatch);
  EXPECT_NE(r.find("the runs below at other batches tell them apart: activations follow the batch, optimizer_state does "
                   "not"),
            std::string::npos)
      << r;
  // The weights and the state, both per parameter: no run, an answer to both.
  r = response(Cause::kOptimizerState, Cause::kParameters);
  EXPECT_EQ(tied_pair_test(v.decision), TiedPairTest::kModelState);
  EXPECT_NE(r.find("both are per parameter"), std::string::npos) << r;
  EXPECT_EQ(r.find("Run the confirming commands"), std::string::npos) << r;
  // Not a tie (another rule): no pair to tell apart.
  v.decision.rule = DecisionRule::kDominant;
  v.decision.top = Component{Cause::kActivations, 120.0};
  v.decision.runner_up = Component{Cause::kAllocatorCache, 100.0};
  EXPECT_EQ(tied_pair_test(v.decision), TiedPairTest::kNone);
}

// A tie whose activations include what the loop holds of a step into the
// next (an independent check's MoCo: 44.01 MiB in the evidence, 27.00 in the
// runs table's forward column, and nothing said which was which): both
// figures in the evidence.
TEST(Render, ATiesActivationsSayWhatTheLoopHoldsBesideTheForward) {
  Decision d;
  d.rule = DecisionRule::kTooClose;
  d.threshold = 1.25;
  d.top = Component{Cause::kActivations, 44.01, 17.0};
  d.runner_up = Component{Cause::kParameters, 36.02};
  const std::string text = describe(d, "moco.json");
  EXPECT_NE(text.find("activations (44.01 MiB: 27.01 MiB forward increment (steady state) and 17.00 MiB of a step "
                      "the loop holds into the next) and parameters (36.02 MiB, parameter bytes) are within 25%"),
            std::string::npos)
      << text;
}

// A recording that could not read the loop (the recorder's recording
// events: no optimizer given, or a model whose forward never ran): said as
// a warning, and the response is to record again, not the confirming
// commands of a run that settles nothing (an independent check's: "Run
// the confirming commands below" with none below).
TEST(Render, ARecordingThatMissedTheLoopSaysToRecordItAgain) {
  Synth s;
  s.steps = 1;
  Report r = synth(s);
  r.producer = Producer{kProducerPython, "test"};
  r.samples.erase(std::remove_if(r.samples.begin(), r.samples.end(),
                                 [](const Sample& x) { return x.phase == Phase::kCleanup; }),
                  r.samples.end());
  r.config.batch_assumed = true;
  r.events.push_back(make_event(EventKind::kRecording, std::nullopt, std::nullopt,
                                "no optimizer was given: pass it, memdiag.record(model, optimizer, ...)"));
  const ReadResult parsed = parse_report_text(dump_report(r), "noopt.json");  // the reader takes the kind
  ASSERT_TRUE(parsed.report) << parsed.error->what();
  const Analysis a = analyse({{"noopt.json", *parsed.report}});
  const std::string text = render_text(Comparison{a});
  EXPECT_NE(text.find("! noopt.json: recorded without what it needs: no optimizer was given"), std::string::npos)
      << text;
  EXPECT_NE(text.find("response: Record the loop again as the warning above says"), std::string::npos) << text;
  EXPECT_NE(text.find("record with batch_size= given"), std::string::npos) << text;  // both said
}

// A job of one's own (the Python recorder wrote it): what was not measured is
// named as the change to make in the job, never as a flag of a tool that
// cannot run it.
TEST(Render, ARemedyNotMeasuredInAJobOfOnesOwnIsTheChangeToMake) {
  std::vector<std::pair<std::string, Report>> reports;
  Synth s;
  s.activations_mib = 40;
  Report r = synth(s);
  r.producer.name = "memdiag.record (Python)";
  reports.emplace_back("job.json", r);
  Analysis a = analyse(reports);
  ASSERT_EQ(a.verdicts.size(), 1u);
  Verdict& v = a.verdicts[0];
  EXPECT_EQ(v.primary_producer, "memdiag.record (Python)");
  v.remedies.push_back(RemedyRow{});
  v.remedies_not_measured = all_values<RemedyKind>();
  v.modes_not_measured = {ParallelMode::kZero1, ParallelMode::kZero3};
  const std::string text = render_text(Comparison{a});
  EXPECT_EQ(text.find("--remedy"), std::string::npos) << text;
  EXPECT_EQ(text.find("--shard"), std::string::npos) << text;
  EXPECT_NE(text.find("checkpoint (in the job: torch.utils.checkpoint"), std::string::npos) << text;
  EXPECT_NE(text.find("zero1 (in the job: torch.distributed.optim.ZeroRedundancyOptimizer)"), std::string::npos) << text;
  for (RemedyKind k : all_values<RemedyKind>()) {
    EXPECT_NE(text.find(std::string(to_string(k)) + " (in the job: "), std::string::npos) << to_string(k);
  }
}

// A run that ran out shows, in its runs-table row, the peak of the phase that
// failed (not of the last one completed) and what was in use, asked for and
// allowed, in MiB: on every committed H200 out-of-memory report.
TEST(Render, AnOutOfMemoryRowShowsTheFailingPhasesMemoryInMib) {
  const ReportSet set = read_reports({std::string(MEMDIAG_FIXTURES_DIR) + "/h200-oom"});
  ASSERT_TRUE(set.errors.empty());
  int rows = 0;
  for (const auto& [source, report] : set.reports) {
    if (report.status != RunStatus::kOom) continue;
    const Analysis a = analyse({{source, report}});
    const Table t = runs_table(a.groups.at(0));
    const auto& row = t.rows.at(0);
    const std::string status = row.back(), peak = row.at(9);
    SCOPED_TRACE(source);
    EXPECT_EQ(status.rfind("oom: ", 0), 0u) << status;
    EXPECT_NE(status.find(" MiB"), std::string::npos) << status;
    double at_failure = 0;
    for (const Event& e : report.events) {
      if (e.kind == EventKind::kOom && e.oom && e.oom->allocated_mib) at_failure = *e.oom->allocated_mib;
    }
    EXPECT_GE(std::stod(peak), at_failure * 0.999 - 0.01) << "peak " << peak;  // as printed, four figures
    ++rows;
  }
  EXPECT_GE(rows, 3);
}

namespace {

// The x of each step's boundary line in the chart of `source` (the first
// forward of each step after the first), in order.
std::vector<std::string> step_lines(const std::string& html, const std::string& source) {
  const auto at = html.find("<figure class=\"run\"><figcaption title=\"" + source + "\"");
  EXPECT_NE(at, std::string::npos) << source;
  const auto end = html.find("</figure>", at);
  std::vector<std::string> xs;
  for (auto i = html.find("<line class=\"step\" x1=\"", at); i < end; i = html.find("<line class=\"step\" x1=\"", i + 1)) {
    const auto b = i + 23;
    xs.push_back(html.substr(b, html.find('"', b) - b));
  }
  return xs;
}

}  // namespace

// The HTML's plots: a run with four micro-batches a step and one without
// line up step by step; the remedy comparison and the overlay come before
// the runs' own charts, the baseline's before the remedy's; captions carry
// file names (the path in a tooltip); the warm-up's workspaces are a band
// of their own; the census is drawn in steps.
TEST(Render, HtmlPlotsLineUpStepsAndPutTheComparisonFirst) {
  Synth s;
  s.case_name = "mine";
  s.activations_mib = 80;
  s.steps = 3;
  Report plain = synth(s);
  Event warm;
  warm.kind = EventKind::kWarmup;
  warm.phase = Phase::kSetup;
  warm.message = "cuBLAS workspaces";
  warm.mib = 40.0;
  plain.events.push_back(warm);
  for (Sample& x : plain.samples) {
    x.tensors = TensorCensus{s.params_mib, x.phase == Phase::kBackward ? s.params_mib : 0.0, x.step ? 2 * s.params_mib : 0.0};
  }
  Report accumulated = plain;
  accumulated.config.remedies = {Remedy{RemedyKind::kAccumulate, 4}};
  std::vector<Sample> split;
  for (const Sample& x : plain.samples) {
    if (x.step && (x.phase == Phase::kForward || x.phase == Phase::kBackward)) continue;
    if (x.step && x.phase == Phase::kStep) {
      for (int k = 0; k < 4; ++k) {
        for (Phase ph : {Phase::kForward, Phase::kBackward}) {
          Sample m = x;
          m.phase = ph;
          m.micro_batch = k;
          m.allocated_mib = plain.samples.front().allocated_mib + (ph == Phase::kForward ? 20 : 5);
          m.peak_allocated_mib = m.allocated_mib;
          m.loss.reset();
          split.push_back(m);
        }
      }
    }
    split.push_back(x);
  }
  accumulated.samples = split;
  // Given in this order on purpose: the remedy's report first.
  const std::vector<std::pair<std::string, Report>> reports{{"/some/long/path/mine-accumulate4.json", accumulated},
                                                            {"/some/long/path/mine.json", plain}};
  const Analysis a = analyse(reports);
  ASSERT_EQ(a.groups.size(), 1u);
  const std::string html = render_html(Comparison{a, reports});
  const auto base_at = html.find("<figure class=\"run\"><figcaption title=\"/some/long/path/mine.json\">mine.json (");
  const auto remedy_at = html.find("<figure class=\"run\"><figcaption title=\"/some/long/path/mine-accumulate4.json\">");
  ASSERT_NE(base_at, std::string::npos) << html.substr(0, 2000);
  ASSERT_NE(remedy_at, std::string::npos);
  EXPECT_LT(base_at, remedy_at) << "the baseline's chart first";
  const auto overlay_at = html.find("<figure class=\"overlay\">");
  ASSERT_NE(overlay_at, std::string::npos);
  EXPECT_LT(overlay_at, base_at) << "the comparison before the runs' own charts";
  const auto bars_at = html.find("<figure class=\"remedies\">");
  if (bars_at != std::string::npos) {
    EXPECT_LT(bars_at, base_at);
  }
  EXPECT_EQ(html.find("<figcaption>/some/long"), std::string::npos) << "no path in a caption";
  const auto plain_steps = step_lines(html, "/some/long/path/mine.json");
  EXPECT_EQ(plain_steps.size(), 3u);  // steps 0, 1 and 2 begin
  EXPECT_EQ(plain_steps, step_lines(html, "/some/long/path/mine-accumulate4.json"));
  EXPECT_NE(html.find("<title>library workspaces (warm-up)</title>"), std::string::npos);
  // Steps, not ramps: the census band's top edge turns at a sample's x
  // (two points with the same x in a row).
  const auto census = html.find("<figure class=\"census\">");
  ASSERT_NE(census, std::string::npos);
  const auto d = html.find(" d=\"M", census);
  const std::string path = html.substr(d + 4, html.find('"', d + 4) - d - 4);
  std::istringstream in(path);
  std::vector<std::string> xs;
  for (std::string tok; in >> tok;) {
    if (tok == "M" || tok == "L" || tok == "Z") continue;
    if (tok[0] == 'M' || tok[0] == 'L') tok = tok.substr(1);
    xs.push_back(tok);
    in >> tok;  // y
  }
  int vertical = 0;
  for (std::size_t i = 1; i < xs.size(); ++i) vertical += xs[i] == xs[i - 1];
  EXPECT_GE(vertical, 10) << path;
}
