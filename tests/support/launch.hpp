// Starting a data-parallel run the way torchrun does, without torchrun: one
// process per rank with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT set (CI machines have no torchrun).
#pragma once

#include "process.hpp"

#include <gtest/gtest.h>

#include <ostream>

#include <string>
#include <vector>

namespace memdiag::testkit {

struct LaunchOptions {
  int world_size = 2;
  int start_ranks = -1;     // how many ranks to start (-1: all); fewer = peers that never join
  int kill_rank = -1;       // SIGKILL this rank ...
  int kill_after_ms = 0;    // ... this long after the start
  std::vector<std::string> env;  // more NAME=VALUE for every rank
};

// Returns each started rank's exit code and stderr, in rank order.
std::vector<Proc> launch_ranks(const std::vector<std::string>& argv, const TempDir& dir, const LaunchOptions& o);

// Runs argv with "-o DIR/NAME-{rank}.json" added, expects every rank to exit
// 0 (and, if asked, its report to pass the schema), and returns the reports
// in rank order.
std::vector<Report> launch_and_load(std::vector<std::string> argv, const TempDir& dir, const std::string& name,
                                    bool check_schema, const LaunchOptions& o = {});

// A world size as a test's parameter: printed and named "world2".
struct World {
  int n;
};
void PrintTo(const World& w, std::ostream* os);
std::string world_name(const ::testing::TestParamInfo<World>& i);

}  // namespace memdiag::testkit
