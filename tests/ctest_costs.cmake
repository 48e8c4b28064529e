# Read by ctest after the gtest suites have listed their tests: the longest
# tests start first on a build that has no timings of its own yet (a fresh
# clone; ctest keeps what it measured in Testing/Temporary/CTestCostData.txt
# and uses that from the second run on). Measured with `ctest -j2 -LE gpu`
# on the 2-core machine; seconds, a scheduling hint only. A name that is not
# a test of this configuration is ignored; the tests added in CMakeLists.txt
# (Python, documents) get their COST there: ctest reads this file before them.
foreach(_memdiag_cost
    "Sharding.ThePerRankCapacityOfEachModeIsWhatRunsFind=61"
    "CiExample.TheReadmeJobPassesAgainstTheCommittedFixturesAndCatchesAGrownPeak=25"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/epsilon  # GetParam() = epsilon=24"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/beta  # GetParam() = beta=20"
    "Sweeps.ThePlanInOneProcessEqualsSeparateProcesses=17"
    "Gloo/ShardingAtWorld.EachModeTrainsAsReplicatedAndHoldsWhatItsFormulaSays/world4  # GetParam() = world4=14"
    "Sharding.AModelWhoseWeightsExceedTheDeviceTrainsUnderZeroThree=12"
    "Sharding.AccumulationAndCheckpointingTrainAsReplicated=12"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/own  # GetParam() = own=11")
  string(REGEX REPLACE "=[0-9]+$" "" _memdiag_name "${_memdiag_cost}")
  string(REGEX REPLACE "^.*=" "" _memdiag_seconds "${_memdiag_cost}")
  set_tests_properties("${_memdiag_name}" PROPERTIES COST ${_memdiag_seconds})
endforeach()

# The slow tier's discovered member (tests/CMakeLists.txt says what the tier
# is): every sharded mode's per-rank capacity against the runs that find it,
# 51-61 s of the 2-core machine.
# (set, not appended: ctest's script mode has no if(TEST); its suite's label
# is integration.)
set_tests_properties("Sharding.ThePerRankCapacityOfEachModeIsWhatRunsFind" PROPERTIES LABELS "integration;slow")
