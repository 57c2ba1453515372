// Every registered --search stops within the run's limits: a deadline and
// an interrupt (core/runner.h), whichever loop the strategy runs (TASO's
// queue, greedy descent, agent episodes and fine-tuning, pass pipelines).
// And a deadline is one deadline: a second search under the same runner
// (a later round, a greedy finish) does not get a fresh one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "core/passes/pass.h"
#include "core/runner.h"
#include "rules/testing.h"
#include "runtime/table_cost_testing.h"
#include "search/search.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;
using testing::TableCost;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The table cost, as slow as a measured one: every node costed takes
// 0.2 ms, so that no search ends by itself within the limits below (each
// one's options are set so that, unlimited, it would run for many seconds).
class SlowCost : public TableCost {
 public:
  OpCost NodeCost(const Graph& g, NodeId id) override {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return TableCost::NodeCost(g, id);
  }
};

struct Fixture {
  Graph graph = zoo::InceptionV3(1);
  Matcher matcher{RuleList(testing::DefaultRules())};
  SlowCost cost;
  // Limits no search reaches by itself in a second: each search gets those
  // of its own settings it declares.
  SearchOptions Options(const std::string& name, Runner* runner) {
    SearchOptions o;
    o.matcher = &matcher;
    o.cost = &cost;
    o.runner = runner;
    o.budget = 1000000;
    std::string passes;
    for (int k = 0; k < 1000; ++k)  // --search=passes: the default order, many times over
      for (const std::string& p : DefaultPassOrder()) passes += p + ",";
    const std::map<std::string, std::string> long_runs = {
        {"episodes", "1000"}, {"horizon", "1000"}, {"passes", passes}};
    for (const SearchParam& p : MakeSearch(name)->Params())
      if (long_runs.count(p.name)) o.params.Set(p.name, long_runs.at(p.name));
    return o;
  }
};

// How far past a limit a search may run: one uninterruptible piece of work
// (loading an agent, one GNN forward pass on Inception-v3, one graph
// built). Generous for sanitizer builds.
constexpr double kSlackS = 3.0;

TEST(SearchLimits, EverySearchStopsAtTheDeadline) {
  Fixture f;
  for (const std::string& name : SearchNames()) {
    if (name == "none") continue;
    RunnerLimits l;
    l.time_limit_s = 1.0;
    Runner runner(l);
    auto t = Clock::now();
    SearchResult r = MakeSearch(name)->Run(f.graph, f.Options(name, &runner));
    const double s = Since(t);
    std::printf("%-12s stopped after %.3f s (limit %.1f s): %s\n", name.c_str(), s, l.time_limit_s,
                StopReasonName(r.stop_reason));
    EXPECT_LE(s, l.time_limit_s + kSlackS) << name;
    // pass_order's agent may stop by itself first; nothing else ends within a second.
    if (name != "pass_order") {
      EXPECT_EQ(r.stop_reason, StopReason::kTimeLimit) << name << " after " << s << " s";
    }
    if (r.stop_reason == StopReason::kTimeLimit) {
      EXPECT_GE(s, l.time_limit_s) << name;
    }
    EXPECT_EQ(r.graph.outputs().size(), f.graph.outputs().size()) << name;
  }
}

TEST(SearchLimits, EverySearchStopsWhenInterrupted) {
  Fixture f;
  for (const std::string& name : SearchNames()) {
    if (name == "none") continue;
    std::atomic<bool> interrupted{false};
    RunnerLimits l;
    l.interrupted = &interrupted;
    Runner runner(l);
    std::thread raise([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      interrupted = true;
    });
    auto t = Clock::now();
    SearchResult r = MakeSearch(name)->Run(f.graph, f.Options(name, &runner));
    const double s = Since(t);
    raise.join();
    EXPECT_LE(s, 0.3 + kSlackS) << name;
    if (name != "pass_order") {
      EXPECT_EQ(r.stop_reason, StopReason::kInterrupted) << name << " after " << s << " s";
    }
  }
}

TEST(SearchLimits, OneDeadlineForEverySearchOfARun) {
  Fixture f;
  RunnerLimits l;
  l.time_limit_s = 0.5;
  Runner runner(l);
  SearchResult first = MakeSearch("taso")->Run(f.graph, f.Options("taso", &runner));
  EXPECT_EQ(first.stop_reason, StopReason::kTimeLimit);
  // The deadline has passed: a second search (a later round, a finish)
  // returns at once with its input, not after a fresh half second.
  auto t = Clock::now();
  SearchResult second = MakeSearch("greedy")->Run(first.graph, f.Options("greedy", &runner));
  EXPECT_LT(Since(t), 0.4);
  EXPECT_EQ(second.stop_reason, StopReason::kTimeLimit);
  EXPECT_TRUE(second.applied.empty());
  EXPECT_EQ(runner.stats().stopped, StopReason::kTimeLimit);
}

TEST(SearchLimits, StepLimitCountsRewritesAppliedByAnySearch) {
  Fixture f;
  for (const std::string name : {"greedy", "taso", "ppo"}) {
    RunnerLimits l;
    l.max_steps = 5;
    Runner runner(l);
    SearchOptions o = f.Options(name, &runner);
    o.greedy_finish = false;
    SearchResult r = MakeSearch(name)->Run(f.graph, o);
    EXPECT_EQ(r.stop_reason, StopReason::kStepLimit) << name;
    // Polled between steps (taso builds at most one graph per costed
    // candidate batch before the next poll).
    EXPECT_GE(runner.stats().steps, 5) << name;
    EXPECT_LE(r.applied.size(), 5u + 1) << name;
  }
}

}  // namespace
}  // namespace rlflow
