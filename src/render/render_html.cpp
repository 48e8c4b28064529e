// One self-contained HTML page for people who would rather look than read:
// per group the verdict and its evidence, then inline SVG plots drawn from
// the runs' samples. No script and nothing from the network, so the file
// opens offline and in a CI artifact viewer.
#include "memdiag/format.hpp"
#include "memdiag/render.hpp"
#include "gate_text.hpp"
#include "section.hpp"
#include "xml_text.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

namespace memdiag {
namespace {

using detail::xml_escape;

constexpr double kW = 560, kH = 240;                     // plot size
constexpr double kLeft = 64, kRight = 44, kTop = 14, kBottom = 62;  // margins
// One colour per meaning across the page: a run's lines and marks, the
// census's roles, and the runs of an overlay each have their own, so that
// no colour means two things on one page.
const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
// allocated, reserved, peak, stranded, failure, limit: kPalette[0..5].
const char* const kRolePalette[] = {"#525252", "#bcbd22", "#e377c2", "#c7c7c7", "#17becf"};
// parameters, gradients, optimizer state, library workspaces, the rest.
const char* const kRunPalette[] = {"#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354"};

// A report's name as a person reads it: the file's, not its path's.
std::string short_name(const std::string& source) {
  const auto slash = source.find_last_of('/');
  return slash == std::string::npos ? source : source.substr(slash + 1);
}

// A "nice" step for about n ticks over [0, max]: 1, 2 or 5 times a power of 10.
// Axes start at a thousandth of a MiB (the figures' printed precision):
// below it a denormal peak made the step underflow to zero and the tick loop
// never end.
constexpr double kMinAxisMiB = 1e-3;
double tick_step(double max, int n) {
  if (!std::isfinite(max)) return 1;
  max = std::max(max, kMinAxisMiB);
  const double raw = max / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

// SVG coordinates: a tenth of a pixel is enough.
std::string num(double v) { return format_fixed(v, 1); }

struct Series {
  std::string label;
  std::string color;
  std::vector<double> y;  // one point per sample; NaN leaves a gap
  bool dashed = false;
  std::vector<double> x{};  // each point's place (phase slots, below)
};

// Where each sample sits on the x axis, in phase slots: setup's two, then
// four per step (forward, backward, step(), cleanup), a step's micro-batches
// sharing its forward and backward slots. Steps are placed by their rank in
// `steps` (the steps of every run drawn together), so a sweep's runs line
// up step by step whatever their micro-batches, and a sampled long job's
// kept steps sit side by side.
using StepSlots = std::map<int, int>;

StepSlots step_slots(const std::vector<const std::vector<Sample>*>& runs, std::optional<int> extra = std::nullopt) {
  StepSlots slots;
  for (const auto* samples : runs) {
    for (const Sample& s : *samples) {
      if (s.step) slots.emplace(*s.step, 0);
    }
  }
  if (extra) slots.emplace(*extra, 0);
  int k = 0;
  for (auto& kv : slots) kv.second = k++;
  return slots;
}

double slot_of(Phase phase, std::optional<int> step, int micro, int micro_batches, const StepSlots& slots) {
  if (!step) return phase == Phase::kOptimizerReady ? 1.0 : 0.0;
  const auto it = slots.find(*step);
  const double base = 2.0 + 4.0 * (it == slots.end() ? static_cast<double>(slots.size()) : it->second);
  const double m = std::max(1, micro_batches);
  switch (phase) {
    case Phase::kForward: return base + 2.0 * micro / m;
    case Phase::kBackward: return base + (2.0 * micro + 1.0) / m;
    case Phase::kStep: return base + 2.0;
    case Phase::kCleanup: return base + 3.0;
    default: return base;
  }
}

std::vector<double> positions(const std::vector<Sample>& samples, const StepSlots& slots) {
  std::map<int, int> micro;
  for (const Sample& s : samples) {
    if (s.step && s.phase == Phase::kForward) ++micro[*s.step];
  }
  std::vector<double> out;
  for (const Sample& s : samples) {
    out.push_back(slot_of(s.phase, s.step, s.micro_batch.value_or(0), s.step ? micro[*s.step] : 1, slots));
  }
  return out;
}

// Axes in MiB with readable ticks, x by phase slot, each phase's samples
// labelled underneath (step boundaries as faint lines).
class Plot {
 public:
  Plot(std::string title, double span, double ymax) : title_(std::move(title)), span_(std::max(span, 1.0)) {
    step_ = tick_step(ymax, 5);
    ymax_ = std::isfinite(ymax) ? std::max(step_, std::ceil(ymax / step_) * step_) : step_;
  }
  double x(double u) const { return kLeft + (kW - kLeft - kRight) * u / span_; }
  double y(double v) const { return kTop + (kH - kTop - kBottom) * (1 - v / ymax_); }

  std::string open(const std::string& css_class) const {
    // One number of decimals for the whole axis, as many as the step needs.
    const int decimals = step_ >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step_) - 1e-9));
    std::ostringstream s;
    s << "<svg class=\"plot " << css_class << "\" viewBox=\"0 0 " << kW << " " << kH << "\" width=\"" << kW
      << "\" height=\"" << kH << "\" role=\"img\" aria-label=\"" << xml_escape(title_) << "\">\n<title>"
      << xml_escape(title_) << "</title>\n";
    // Counted, not accumulated: bounded whatever the figures (at most 10 ticks).
    const int ticks = static_cast<int>(std::min(10.0, std::round(ymax_ / step_)));
    for (int k = 0; k <= ticks; ++k) {
      const double v = k * step_;
      s << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << num(y(v)) << "\" y2=\""
        << num(y(v)) << "\"/><text class=\"tick\" x=\"" << kLeft - 6 << "\" y=\"" << num(y(v) + 4)
        << "\" text-anchor=\"end\">" << format_fixed(v, decimals) << "</text>\n";
    }
    s << "<text class=\"axis\" x=\"14\" y=\"" << num((kTop + kH - kBottom) / 2) << "\" transform=\"rotate(-90 14 "
      << num((kTop + kH - kBottom) / 2) << ")\" text-anchor=\"middle\">MiB</text>\n";
    return s.str();
  }

  std::string line(const Series& se) const {
    std::ostringstream s;
    std::string d;
    bool pen = false;
    for (std::size_t i = 0; i < se.y.size(); ++i) {
      if (std::isnan(se.y[i])) {
        pen = false;
        continue;
      }
      d += (pen ? " L" : " M") + num(x(se.x[i])) + " " + num(y(se.y[i]));
      pen = true;
    }
    s << "<path class=\"series\" d=\"" << d << "\" fill=\"none\" stroke=\"" << se.color << "\" stroke-width=\"2\""
      << (se.dashed ? " stroke-dasharray=\"5 3\"" : "") << "><title>" << xml_escape(se.label) << "</title></path>\n";
    return s.str();
  }

  // Phase names under the x axis, thinned to what fits.
  std::string phases(const std::vector<Sample>& samples, const std::vector<double>& xs) const {
    std::ostringstream s;
    const std::size_t every = std::max<std::size_t>(1, samples.size() / 14);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (samples[i].phase == Phase::kForward && samples[i].micro_batch.value_or(0) == 0 && i > 0) {
        s << "<line class=\"step\" x1=\"" << num(x(xs[i])) << "\" x2=\"" << num(x(xs[i])) << "\" y1=\"" << kTop
          << "\" y2=\"" << kH - kBottom << "\"/>\n";
      }
      if (i % every != 0) continue;
      const double bx = x(xs[i]), by = kH - kBottom + 10;
      s << "<text class=\"phase\" x=\"" << num(bx) << "\" y=\"" << num(by) << "\" transform=\"rotate(35 " << num(bx)
        << " " << num(by) << ")\">" << to_string(samples[i].phase)
        << (samples[i].step ? " " + std::to_string(*samples[i].step) : std::string()) << "</text>\n";
    }
    return s.str();
  }

  static std::string legend(const std::vector<Series>& series) {
    std::ostringstream s;
    s << "<div class=\"legend\">";
    for (const Series& se : series) {
      s << "<span><i style=\"background:" << se.color << "\"></i>" << xml_escape(se.label) << "</span>";
    }
    s << "</div>\n";
    return s.str();
  }

 private:
  std::string title_;
  double span_;
  double step_ = 1, ymax_ = 1;
};

double nan() { return std::numeric_limits<double>::quiet_NaN(); }

// Allocated, reserved and peak across one run; ymax is shared by the
// group's runs so that side by side (ranks, a sweep) they read on one scale.
std::string run_plot(const std::string& source, const Report& r, double ymax) {
  // An out-of-memory run: the failure gets a point of its own at the phase
  // that failed (what was live, and that plus the refused request), and the
  // budget a line, so the chart shows it had no room left.
  const Event* oom = nullptr;
  for (const Event& e : r.events) {
    if (e.kind == EventKind::kOom && e.oom) oom = &e;
  }
  const StepSlots slots = step_slots({&r.samples}, oom ? oom->step : std::nullopt);
  const std::vector<double> xs = positions(r.samples, slots);
  Series alloc{"allocated", kPalette[0], {}, false, xs}, reserved{"reserved", kPalette[1], {}, true, xs},
      peak{"peak", kPalette[2], {}, false, xs};
  for (const Sample& s : r.samples) {
    alloc.y.push_back(s.allocated_mib);
    peak.y.push_back(s.peak_allocated_mib);
    reserved.y.push_back(s.reserved_mib.value_or(nan()));
  }
  std::vector<Series> all{alloc, peak};
  if (std::any_of(r.samples.begin(), r.samples.end(), [](const Sample& s) { return s.reserved_mib.has_value(); })) {
    all.push_back(reserved);
  }
  double failed_at = xs.empty() ? 0.0 : xs.back() + 1.0;
  if (oom && oom->phase) failed_at = slot_of(*oom->phase, oom->step, 0, 1, slots);
  const double span = std::max(xs.empty() ? 1.0 : xs.back(), oom ? failed_at : 0.0);
  std::optional<double> limit = r.config.memory_limit_mib;
  if (oom && oom->oom->limit_mib) limit = oom->oom->limit_mib;
  if (oom) {
    const OomDetails& d = *oom->oom;
    ymax = std::max({ymax, d.allocated_mib.value_or(0) + d.request_mib.value_or(0), d.reserved_mib.value_or(0)});
  }
  if (limit && *limit <= 4 * ymax) ymax = std::max(ymax, *limit);
  Plot p("memory across " + short_name(source), span, ymax);
  std::ostringstream s;
  s << "<figure class=\"run\"><figcaption title=\"" << xml_escape(source) << "\">" << xml_escape(short_name(source))
    << " (rank " << r.config.parallel.rank << ", batch " << r.config.batch_size_per_device << ", "
    << xml_escape(r.config.preset) << ", " << to_string(r.status) << ")</figcaption>\n"
    << p.open("memory");
  // Free memory stranded in split segments, as a band above allocated: the
  // part of reserved - allocated the allocator could not reuse.
  const bool stranded = std::any_of(r.samples.begin(), r.samples.end(),
                                    [](const Sample& x) { return x.inactive_split_mib.value_or(0) >= 0.01; });
  std::vector<Series> legend = all;
  if (stranded) {
    std::string d;
    for (std::size_t i = 0; i < r.samples.size(); ++i) {
      const Sample& x = r.samples[i];
      d += (i ? " L" : "M") + num(p.x(xs[i])) + " " + num(p.y(x.allocated_mib + x.inactive_split_mib.value_or(0)));
    }
    for (std::size_t i = r.samples.size(); i-- > 0;) d += " L" + num(p.x(xs[i])) + " " + num(p.y(r.samples[i].allocated_mib));
    s << "<path class=\"band stranded\" d=\"" << d << " Z\" fill=\"" << kPalette[3]
      << "\" fill-opacity=\"0.45\"><title>stranded in split segments (reserved, not reusable)</title></path>\n";
    legend.push_back({"stranded in split segments", kPalette[3], {}});
  }
  for (const Series& se : all) s << p.line(se);
  if (limit && *limit <= ymax) {
    s << "<line class=\"limit\" x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << num(p.y(*limit))
      << "\" y2=\"" << num(p.y(*limit)) << "\" stroke=\"" << kPalette[5]
      << "\" stroke-dasharray=\"2 3\"><title>memory limit " << format_mib(*limit) << " MiB</title></line>\n";
    legend.push_back({"limit " + format_mib(*limit) + " MiB", kPalette[5], {}, true});
  }
  if (oom) {
    const OomDetails& d = *oom->oom;
    const double at = d.allocated_mib.value_or(oom->mib.value_or(0));
    const double x = p.x(failed_at);
    s << "<line class=\"failure\" x1=\"" << num(x) << "\" x2=\"" << num(x) << "\" y1=\"" << num(p.y(at)) << "\" y2=\""
      << num(p.y(at + d.request_mib.value_or(0))) << "\" stroke=\"" << kPalette[4]
      << "\" stroke-width=\"4\"><title>refused: " << format_mib(d.request_mib.value_or(0)) << " MiB on top of "
      << format_mib(at) << " MiB live</title></line>\n"
      << "<circle class=\"failure\" cx=\"" << num(x) << "\" cy=\"" << num(p.y(at)) << "\" r=\"4\" fill=\""
      << kPalette[4] << "\"><title>out of memory in " << (oom->phase ? to_string(*oom->phase) : "an unknown phase")
      << (oom->step ? " " + std::to_string(*oom->step) : std::string()) << "</title></circle>\n";
    legend.push_back({"out of memory: live + refused request", kPalette[4], {}});
  }
  s << p.phases(r.samples, xs) << "</svg>\n" << Plot::legend(legend) << "</figure>\n";
  return s.str();
}

// The tensor census stacked: parameters, gradients, optimizer state, the
// library workspaces the warm-up made, the rest. Drawn as steps: a sample
// is taken at its phase's end, so a role holds its last counted figure until
// the next count changes it (the optimizer's state appears at step(), not
// as a ramp across backward).
std::string census_plot(const std::string& source, const Report& r, double ymax) {
  if (std::none_of(r.samples.begin(), r.samples.end(), [](const Sample& s) { return s.tensors.has_value(); })) return "";
  const std::vector<double> xs = positions(r.samples, step_slots({&r.samples}));
  double warmup = 0;
  for (const Event& e : r.events) {
    if (e.kind == EventKind::kWarmup && e.mib) warmup += *e.mib;
  }
  Plot p("tensor census of " + short_name(source), xs.empty() ? 1.0 : xs.back(), ymax);
  const char* names[] = {"parameters", "gradients", "optimizer state", "library workspaces (warm-up)",
                         "activations and the rest"};
  std::vector<std::vector<double>> bands(5);
  for (const Sample& s : r.samples) {
    const TensorCensus t = s.tensors.value_or(TensorCensus{});
    const double rest = std::max(0.0, s.allocated_mib - t.parameters_mib - t.gradients_mib - t.optimizer_state_mib);
    const double workspaces = std::min(rest, warmup);
    bands[0].push_back(t.parameters_mib);
    bands[1].push_back(t.gradients_mib);
    bands[2].push_back(t.optimizer_state_mib);
    bands[3].push_back(workspaces);
    bands[4].push_back(rest - workspaces);
  }
  std::ostringstream s;
  s << "<figure class=\"census\"><figcaption title=\"" << xml_escape(source) << "\">tensor census, "
    << xml_escape(short_name(source)) << "</figcaption>\n" << p.open("census");
  std::vector<double> base(r.samples.size(), 0.0);
  std::vector<Series> legend;
  auto stepped = [&](const std::vector<double>& v, bool backwards) {
    // Step-after through the points, forwards along the top edge or
    // backwards along the bottom one.
    std::string d;
    const std::size_t n = v.size();
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = backwards ? n - 1 - k : k;
      if (k == 0) {
        d += (backwards ? " L" : "M") + num(p.x(xs[i])) + " " + num(p.y(v[i]));
        continue;
      }
      // Forwards: at x[i] the figure moves from v[i-1] to v[i]; backwards
      // the same corners in reverse.
      const std::size_t prev = backwards ? i + 1 : i - 1;
      if (!backwards) {
        d += " L" + num(p.x(xs[i])) + " " + num(p.y(v[prev])) + " L" + num(p.x(xs[i])) + " " + num(p.y(v[i]));
      } else {
        d += " L" + num(p.x(xs[prev])) + " " + num(p.y(v[i])) + " L" + num(p.x(xs[i])) + " " + num(p.y(v[i]));
      }
    }
    return d;
  };
  for (int b = 0; b < 5; ++b) {
    if (b == 3 && warmup <= 0) continue;  // no warm-up, no band
    std::vector<double> top(base.size());
    for (std::size_t i = 0; i < base.size(); ++i) top[i] = base[i] + bands[b][i];
    s << "<path class=\"band\" d=\"" << stepped(top, false) << stepped(base, true) << " Z\" fill=\"" << kRolePalette[b]
      << "\" fill-opacity=\"0.7\"><title>" << names[b] << "</title></path>\n";
    base = top;
    legend.push_back({names[b], kRolePalette[b], {}});
  }
  s << p.phases(r.samples, xs) << "</svg>\n" << Plot::legend(legend) << "</figure>\n";
  return s.str();
}

// A sweep's runs overlaid: one line of allocated memory per run, step by
// step (the runs' steps share their slots whatever their micro-batches).
std::string overlay_plot(const Group& g, const std::map<std::string, const Report*>& by_source,
                         const std::vector<const RunFeatures*>& order) {
  std::vector<const std::vector<Sample>*> runs;
  std::vector<const RunFeatures*> drawn;
  double ymax = 0;
  for (const RunFeatures* f : order) {
    const auto it = by_source.find(f->source);
    if (it == by_source.end()) continue;
    runs.push_back(&it->second->samples);
    drawn.push_back(f);
    for (const Sample& s : it->second->samples) ymax = std::max(ymax, s.peak_allocated_mib);
  }
  if (runs.size() < 2) return "";
  const StepSlots slots = step_slots(runs);
  std::vector<Series> series;
  const std::vector<Sample>* longest = nullptr;
  double span = 1, longest_span = -1;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const RunFeatures& f = *drawn[k];
    const std::vector<double> xs = positions(*runs[k], slots);
    Series se{short_name(f.source) + " (batch " + std::to_string(f.local_batch) + ", " + f.config.preset + ", " +
                  std::to_string(f.config.steps) + " steps" +
                  (f.config.parallel.world_size > 1 ? ", rank " + std::to_string(f.id.rank) : std::string()) + ")",
              kRunPalette[k % 8], {}, false, xs};
    for (const Sample& s : *runs[k]) se.y.push_back(s.allocated_mib);
    const double end = xs.empty() ? 0 : xs.back();
    span = std::max(span, end);
    if (end > longest_span) {
      longest_span = end;
      longest = runs[k];
    }
    series.push_back(std::move(se));
  }
  Plot p("allocated memory of every run of " + g.label, span, ymax);
  std::ostringstream s;
  s << "<figure class=\"overlay\"><figcaption>every run, allocated, step by step</figcaption>\n" << p.open("overlay");
  for (const Series& se : series) s << p.line(se);
  s << p.phases(*longest, positions(*longest, slots)) << "</svg>\n" << Plot::legend(series) << "</figure>\n";
  return s.str();
}

// Remedies as bars: each run's peak beside its baseline's.
std::string remedy_bars(const Verdict& v) {
  if (v.remedies.empty()) return "";
  double ymax = 0;
  for (const RemedyRow& r : v.remedies) ymax = std::max({ymax, r.peak_mib, r.baseline_peak_mib});
  const double step = tick_step(ymax, 5),
               top = std::isfinite(ymax) ? std::max(step, std::ceil(ymax / step) * step) : step;
  const double row = 22, width = 720, label_w = 220, bar_w = width - label_w - 90;
  const double height = 20 + row * static_cast<double>(v.remedies.size() + 1);
  std::ostringstream s;
  s << "<figure class=\"remedies\"><figcaption>peak with each remedy (grey: its baseline)</figcaption>\n"
    << "<svg class=\"plot bars\" viewBox=\"0 0 " << width << " " << num(height) << "\" width=\"" << width << "\" height=\""
    << num(height) << "\" role=\"img\" aria-label=\"remedies\"><title>peak per remedy, MiB</title>\n";
  double y = 10;
  for (const RemedyRow& r : v.remedies) {
    const double wb = bar_w * r.baseline_peak_mib / top, wr = bar_w * r.peak_mib / top;
    s << "<text class=\"tick\" x=\"" << label_w - 6 << "\" y=\"" << num(y + 14) << "\" text-anchor=\"end\">"
      << xml_escape(r.remedy) << "</text>"
      << "<rect x=\"" << label_w << "\" y=\"" << num(y + 2) << "\" width=\"" << num(wb) << "\" height=\"16\" fill=\"#ccc\"/>"
      << "<rect class=\"bar\" x=\"" << label_w << "\" y=\"" << num(y + 6) << "\" width=\"" << num(wr)
      << "\" height=\"8\" fill=\"" << (r.reduces_cause ? kPalette[2] : kPalette[1]) << "\"><title>" << xml_escape(r.remedy)
      << ": " << format_mib(r.peak_mib) << " MiB</title></rect>"
      << "<text class=\"tick\" x=\"" << num(label_w + std::max(wb, wr) + 6) << "\" y=\"" << num(y + 14) << "\">"
      << format_mib(r.peak_mib) << " MiB</text>\n";
    y += row;
  }
  s << "<text class=\"axis\" x=\"" << label_w << "\" y=\"" << num(y + 14) << "\">0 to " << format_mib(top)
    << " MiB</text></svg></figure>\n";
  return s.str();
}

std::string table_html(const Table& t, const char* css_class) {
  std::ostringstream s;
  s << "<table class=\"" << css_class << "\"><thead><tr>";
  for (const std::string& h : t.headers) s << "<th>" << xml_escape(h) << "</th>";
  s << "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    s << "<tr>";
    for (const std::string& c : row) s << "<td>" << xml_escape(c) << "</td>";
    s << "</tr>\n";
  }
  s << "</tbody></table>\n";
  return s.str();
}

std::string list_html(const std::vector<std::string>& items, const char* css_class) {
  if (items.empty()) return "";
  std::string s = std::string("<ul class=\"") + css_class + "\">\n";
  for (const std::string& i : items) s += "<li>" + xml_escape(i) + "</li>\n";
  return s + "</ul>\n";
}

// Everything the text says about a group, from the same section model.
std::string section_html(const detail::Section& s) {
  std::ostringstream out;
  out << "<h2>" << xml_escape(s.title) << "</h2>\n<p class=\"verdict\">dominant cause: <span class=\"cause\">"
      << xml_escape(s.cause) << "</span> (" << xml_escape(s.label) << ")" << (s.confirmed ? ", confirmed by the sweep" : "")
      << "</p>\n";
  if (!s.decision.empty()) out << "<p class=\"decision\">" << xml_escape(s.decision) << "</p>\n";
  out << "<h3>evidence</h3>\n" << list_html(s.evidence, "evidence");
  if (!s.warnings.empty()) out << "<h3>warnings</h3>\n" << list_html(s.warnings, "warnings");
  out << "<p class=\"response\">response: " << xml_escape(s.response) << "</p>\n";
  if (!s.best_remedy.empty()) out << "<p class=\"best-remedy\">" << xml_escape(s.best_remedy) << "</p>\n";
  if (!s.sharding.empty()) out << "<p class=\"sharding\">" << xml_escape(s.sharding) << "</p>\n";
  if (!s.not_measured.empty()) {
    out << "<p class=\"not-measured\">not measured here: " << xml_escape(s.not_measured) << "</p>\n";
  }
  for (const std::string& c : s.capacity) out << "<p class=\"capacity\">capacity: " << xml_escape(c) << "</p>\n";
  if (!s.not_helpful.empty()) out << "<h3>would not help</h3>\n" << list_html(s.not_helpful, "not-helpful");
  if (!s.commands.empty()) {
    out << "<h3>to confirm, run</h3>\n<pre class=\"confirm\">";
    for (std::size_t k = 0; k < s.commands.size(); ++k) {
      if (!s.command_costs[k].empty()) out << "# " << xml_escape(s.command_costs[k]) << "\n";
      out << "$ " << xml_escape(s.commands[k]) << "\n";
    }
    out << "</pre>\n";
  }
  if (!s.changes.empty()) out << "<h3>" << xml_escape(detail::changes_heading(s)) << "</h3>\n" << list_html(s.changes, "changes");
  if (s.remedies) out << "<h3>remedies, each against its baseline run</h3>\n" << table_html(*s.remedies, "remedies");
  if (s.parallel_modes) {
    out << "<h3>per rank under each parallel mode</h3>\n<p class=\"parallel-modes\">" << xml_escape(s.parallel_modes_note)
        << "</p>\n" << table_html(*s.parallel_modes, "parallel-modes");
  }
  if (s.sharded_capacity) {
    out << "<h3>largest batch per rank under each parallel mode (predicted from the single-rank run)</h3>\n"
        << table_html(*s.sharded_capacity, "sharded-capacity");
  }
  if (s.searches) {
    out << "<h3>largest batch found per variant (--find-max-batch)</h3>\n" << table_html(*s.searches, "searches");
  }
  out << "<h3>runs</h3>\n" << table_html(s.runs, "runs");
  for (const auto& [label, table] : s.ranks) {
    out << "<h3>ranks (" << xml_escape(label) << ")</h3>\n" << table_html(table, "ranks");
  }
  return out.str();
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1240px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-top:12px}
.cause{font-weight:600}.rows{display:flex;flex-wrap:wrap;gap:16px}
figure{margin:8px 0}.rows figure{max-width:580px}figcaption{font-size:12px;color:#555}
svg.plot{background:#fff;border:1px solid #e4e4e4}
.grid{stroke:#eee}.step{stroke:#ddd;stroke-dasharray:2 3}.tick,.phase,.axis{font-size:10px;fill:#555}
.legend{font-size:12px}.legend span{margin-right:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.regressed{color:#b00;font-weight:600}.warnings li,.decision{color:#9a5b00}h3{font-size:14px;margin:10px 0 4px}
pre.confirm{background:#f6f6f6;padding:6px;white-space:pre-wrap}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:2px 6px}
h2.pass{color:#070}h2.fail{color:#b00}tr.failed td{color:#b00;font-weight:600}
)";

}  // namespace

std::string render_html(const Comparison& comparison) {
  const Analysis& a = comparison.analysis;
  const std::vector<std::pair<std::string, Report>>& reports = comparison.reports;
  const RegressionReport* regression = comparison.baseline;
  const std::vector<GateCheck>& gates = comparison.gates;
  std::map<std::string, const Report*> by_source;
  for (const auto& [source, report] : reports) by_source.emplace(source, &report);
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>memdiag: memory reports</title>\n<style>"
      << kStyle << "</style></head><body>\n<h1>memdiag: " << a.groups.size() << " group"
      << (a.groups.size() == 1 ? "" : "s") << " of reports</h1>\n";
  if (detail::gate_summary_wanted(gates, regression)) {
    // The gate's outcome first, failures at the top of its table.
    const std::vector<GateLine> lines = gate_lines(gates, regression);
    const bool pass = std::all_of(lines.begin(), lines.end(), [](const GateLine& l) { return l.held; });
    out << "<section class=\"gate\"><h2 class=\"" << (pass ? "pass" : "fail") << "\">Memory gate: "
        << (pass ? "PASS" : "FAIL") << "</h2>\n";
    if (regression != nullptr) {
      out << "<p>A peak regresses when it grows by more than " << xml_escape(regression_threshold(regression->thresholds))
          << ".</p>\n";
    }
    out << "<table class=\"gate\"><tr><th>outcome</th><th>check</th></tr>\n";
    for (bool held : {false, true}) {
      for (const GateLine& l : lines) {
        if (l.held != held) continue;
        out << "<tr class=\"" << (held ? "held" : "failed") << "\"><td>" << (held ? "held" : "FAILED") << "</td><td>"
            << xml_escape(l.words) << "</td></tr>\n";
      }
    }
    out << "</table></section>\n";
  }
  for (std::size_t i = 0; i < a.groups.size(); ++i) {
    const Group& g = a.groups[i];
    const Verdict& v = a.verdicts[i];
    out << "<section class=\"group\" id=\"group-" << i << "\">\n" << section_html(detail::section_of(g, v));
    double ymax = 0;
    for (const RunFeatures& f : g.runs) {
      const auto it = by_source.find(f.source);
      if (it == by_source.end()) continue;
      for (const Sample& s : it->second->samples) ymax = std::max({ymax, s.peak_allocated_mib, s.reserved_mib.value_or(0)});
    }
    // The comparison first (remedies, then every run overlaid), then each
    // run's own charts, its memory beside its census, the baseline runs
    // (no remedy, no variant) before the runs of a change.
    std::vector<const RunFeatures*> order;
    for (const RunFeatures& f : g.runs) order.push_back(&f);
    std::stable_sort(order.begin(), order.end(), [](const RunFeatures* x, const RunFeatures* y) {
      const bool bx = x->config.remedies.empty() && x->config.variant.empty();
      const bool by = y->config.remedies.empty() && y->config.variant.empty();
      return bx && !by;
    });
    out << remedy_bars(v) << overlay_plot(g, by_source, order);
    for (const RunFeatures* f : order) {
      const auto it = by_source.find(f->source);
      if (it == by_source.end()) continue;
      out << "<div class=\"rows\">\n"
          << run_plot(f->source, *it->second, ymax) << census_plot(f->source, *it->second, ymax) << "</div>\n";
    }
    out << "</section>\n";
  }
  if (!a.unreadable.empty()) {
    out << "<section class=\"unreadable\"><h2>Not analysed: " << a.unreadable.size() << " input"
        << (a.unreadable.size() == 1 ? "" : "s") << " could not be read</h2>\n<ul>\n";
    for (const std::string& u : a.unreadable) out << "<li>" << xml_escape(printable(u)) << "</li>\n";
    out << "</ul></section>\n";
  }
  if (regression != nullptr) {
    out << "<section class=\"baseline\"><h2>Against the baseline</h2>\n<ul>\n";
    for (const RegressionPair& p : regression->pairs) {
      out << "<li" << (p.regressed ? " class=\"regressed\"" : "") << ">" << xml_escape(describe(p))
          << table_html(regression_phase_table(p), "baseline-phases") << "</li>\n";
    }
    for (const std::string& s : regression->new_without_baseline) out << "<li>no baseline for " << xml_escape(s) << "</li>\n";
    for (const std::string& s : regression->baseline_without_new) {
      out << "<li>no new report for baseline " << xml_escape(s) << "</li>\n";
    }
    out << "</ul>\n<p class=\"outcome\">" << xml_escape(regression_outcome(*regression)) << "</p></section>\n";
  }
  out << "</body></html>\n";
  return out.str();
}

}  // namespace memdiag
