#include "fuzz_targets.hpp"

#include "memdiag/case_spec.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/gates.hpp"
#include "memdiag/regression.hpp"
#include "memdiag/render.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"

#include <string>

namespace memdiag::fuzz {

void report_pipeline(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ReadResult r = parse_report_text(text, "fuzz.json");
  if (!r.report) return;  // refused with an InputError: what should happen to junk
  // What the writer makes of an accepted report must read back.
  const std::string again = dump_report(*r.report);
  if (!parse_report_text(again, "again.json").report) __builtin_trap();
  const std::vector<std::pair<std::string, Report>> reports{{"fuzz.json", *r.report}};
  const Analysis a = analyse(reports, {}, {1024.0});
  (void)render_text(a);
  (void)render_markdown(a);
  (void)render_json(a).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  GateSpec gates;
  gates.expect = {{r.report->case_info.name, Cause::kActivations}};
  gates.fail_on = {Cause::kRetainedGraph};
  const RegressionReport reg = compare_to_baseline(reports, reports, RegressionThresholds{});
  if (reg.regressed()) __builtin_trap();  // a report never regresses against itself
  (void)render_junit(a, check_gates(a, gates), &reg);
  (void)render_html(a, reports, &reg);
  (void)render_regression_text(reg);
}

void case_reader(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)parse_case_text(text, "fuzz.json");
  } catch (const InputError&) {
    // Refused, naming the path: what should happen to junk.
  }
}

}  // namespace memdiag::fuzz
