// Where the forward's memory lives, from the recorder's per-module readings:
// the module types that hold most of it, and the largest modules where the
// model fans out. Decided here, worded by the renderers.
#include "modules.hpp"

#include <algorithm>
#include <map>

namespace memdiag::detail {
namespace {

using evidence::ModuleShare;

constexpr std::size_t kListed = 5;
// A child holding this share of its parent's forward is where the model's
// memory is, not a branch of it: the listing goes down into it (a Hugging
// Face LM's `transformer` under GPT2LMHeadModel, torchvision's `features`).
constexpr double kDominantChild = 0.8;

std::vector<ModuleShare> largest(std::vector<ModuleShare> v, double total) {
  std::stable_sort(v.begin(), v.end(), [](const ModuleShare& a, const ModuleShare& b) { return a.mib > b.mib; });
  v.erase(std::remove_if(v.begin(), v.end(), [](const ModuleShare& m) { return m.mib <= 0; }), v.end());
  if (v.size() > kListed) v.resize(kListed);
  for (ModuleShare& m : v) m.share = total > 0 ? m.mib / total : 0;
  return v;
}

}  // namespace

using evidence::ModuleShare;

std::optional<evidence::ForwardByModule> forward_by_module(const RunFeatures& p) {
  if (p.modules.empty()) return std::nullopt;
  evidence::ForwardByModule out;
  out.step = p.modules_step.value_or(0);
  const ModuleRecord* root = nullptr;
  for (const ModuleRecord& m : p.modules) {
    if (m.parent) continue;
    out.total_mib += m.mib;  // the loop's calls: the model and any module outside it
    if (m.name && m.name->empty()) {
      root = &m;
    } else if (!m.name) {
      out.outside.push_back(ModuleShare{"", m.type, m.mib, 0});
    }
  }
  if (out.total_mib <= 0) return std::nullopt;
  if (root) out.model_type = root->type;
  for (const StepFigures& st : p.steps) {
    if (st.step == out.step) out.forward_increment_mib = st.forward_increment_mib;
  }
  // By class: each module's own part (what its children did not add), so
  // that nothing is counted twice and the parts add up to the total.
  std::map<std::string, double> by_type;
  for (const ModuleRecord& m : p.modules) by_type[m.type] += m.own_mib;
  double made = 0;
  for (const auto& [type, mib] : by_type) {
    out.types.push_back(ModuleShare{"", type, mib, 0});
    if (mib > 0) made += mib;
    if (mib < 0) out.freed_in_parents_mib -= mib;
  }
  // Shares of what the types made where some of it was freed again (their
  // parts over the total read Linear 100% and ReLU 100% of a Sequential).
  out.types = largest(std::move(out.types), out.freed_in_parents_mib > 0 ? made : out.total_mib);
  out.outside = largest(std::move(out.outside), out.total_mib);
  // From the model down to where it fans out.
  if (root) {
    std::string under = "";
    double under_mib = root->mib;
    for (int depth = 0; depth < 64; ++depth) {
      std::vector<ModuleShare> children;
      for (const ModuleRecord& m : p.modules) {
        if (m.parent && *m.parent == under && m.name) children.push_back(ModuleShare{*m.name, m.type, m.mib, 0});
      }
      const auto top = std::max_element(children.begin(), children.end(),
                                        [](const ModuleShare& a, const ModuleShare& b) { return a.mib < b.mib; });
      const bool has_children = top != children.end() &&
                                std::any_of(p.modules.begin(), p.modules.end(), [&](const ModuleRecord& m) {
                                  return m.parent && *m.parent == top->name;
                                });
      if (top != children.end() && has_children && under_mib > 0 && top->mib >= kDominantChild * under_mib) {
        under = top->name;
        under_mib = top->mib;
        continue;
      }
      out.under = under;
      // Where modules' outputs were freed again in their parents' code,
      // the net total can be far below what they made (a layer's output
      // kept on the module and replaced by the next forward: 0.039 MiB net,
      // l1 16.00 MiB read 40960%): shares of what was made, as the types'.
      out.modules = largest(std::move(children), out.freed_in_parents_mib > 0 ? std::max(out.total_mib, made)
                                                                               : out.total_mib);
      break;
    }
  }
  return out;
}

}  // namespace memdiag::detail
