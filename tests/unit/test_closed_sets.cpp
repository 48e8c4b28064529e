// Every closed set's one table of names: its to_string(). The values the
// tables give are the enum's, in order, each with a name of its own, and
// the parser derived from them reads every name back.
#include "memdiag/analysis.hpp"
#include "memdiag/case_spec.hpp"
#include "memdiag/enum_names.hpp"
#include "memdiag/parallelism.hpp"
#include "memdiag/regression.hpp"
#include "memdiag/remedy.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_identity.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace memdiag;

namespace {

template <typename E>
void expect_table(const char* what) {
  SCOPED_TRACE(what);
  const std::vector<E>& all = all_values<E>();
  ASSERT_FALSE(all.empty());
  std::set<std::string> names;
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<int>(all[i]), static_cast<int>(i));  // contiguous from 0, in order
    const std::string name = to_string(all[i]);
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "two values are spelt " << name;
    EXPECT_EQ(parse_enum<E>(name), all[i]);
  }
  EXPECT_EQ(to_string(static_cast<E>(all.size())), nullptr);
  EXPECT_FALSE(parse_enum<E>("no-such-value"));
  EXPECT_FALSE(parse_enum<E>(""));
  EXPECT_EQ(enum_names<E>(", ").size() + 2, [&] {
    std::size_t n = 0;
    for (const std::string& s : names) n += s.size() + 2;
    return n;
  }());
}

}  // namespace

TEST(ClosedSets, EveryTableNamesEachValueOnce) {
  expect_table<Phase>("Phase");
  expect_table<EventKind>("EventKind");
  expect_table<RunStatus>("RunStatus");
  expect_table<CapacitySearch::LimitSource>("LimitSource");
  expect_table<Activation>("Activation");
  expect_table<DType>("DType");
  expect_table<OptimizerType>("OptimizerType");
  expect_table<RemedyKind>("RemedyKind");
  expect_table<ParallelMode>("ParallelMode");
  expect_table<Aspect>("Aspect");
  expect_table<Cause>("Cause");
  expect_table<SweepKind>("SweepKind");
  expect_table<DecisionRule>("DecisionRule");
  expect_table<MovedComponent>("MovedComponent");
}

TEST(ClosedSets, EveryRemedyAndShardedModeAnswersACauseAndSaysItself) {
  for (RemedyKind k : all_values<RemedyKind>()) {
    const RemedyDefinition& d = definition(k);
    EXPECT_EQ(d.kind, k);
    EXPECT_EQ(std::string(d.syntax).rfind(to_string(k), 0), 0u) << d.syntax;
    // split=K is measured to show that the source's form of splitting does
    // not help; it is the one remedy that answers no cause.
    EXPECT_EQ(d.answers.empty(), k == RemedyKind::kSplit) << to_string(k);
    EXPECT_FALSE(std::string(d.summary).empty());
    for (Cause c : d.answers) {
      const auto list = remedies_answering(c);
      EXPECT_NE(std::find(list.begin(), list.end(), k), list.end());
    }
  }
  for (ParallelMode m : all_values<ParallelMode>()) {
    const ParallelModeDefinition& d = definition(m);
    EXPECT_EQ(d.mode, m);
    EXPECT_EQ(is_sharded(m), !d.answers.empty()) << to_string(m);
  }
  // Help lists every remedy by its syntax.
  const std::string help = remedies_help();
  for (RemedyKind k : all_values<RemedyKind>()) EXPECT_NE(help.find(definition(k).syntax), std::string::npos);
}
