# Read by ctest after the gtest suites have listed their tests: the longest
# tests start first on a build that has no timings of its own yet (a fresh
# clone; ctest keeps what it measured in Testing/Temporary/CTestCostData.txt
# and uses that from the second run on). Every default-tier test of a second
# or more, as measured with `ctest -j2 -LE slow` on the 2-core machine:
# given only the longest few, a fresh clone's ctest took 247 s where the
# same tests ordered by a run's own timings took 226 s. Seconds, a
# scheduling hint only. A name that is not a test of this configuration is
# ignored; the tests added with add_test (Python, documents, the
# consumer and exhaustiveness builds) get their COST where they are added:
# ctest reads this file before them.
foreach(_memdiag_cost
    "Sharding.ThePerRankCapacityOfEachModeIsWhatRunsFind=61"
    "Capacity.ATracedRunPredictsEveryCaseToTheSampleOnTheCpu=23.6"
    "Sweeps.ThePlanInOneProcessEqualsSeparateProcesses=16.4"
    "CiExample.TheReadmeJobPassesAgainstTheCommittedFixturesAndCatchesAGrownPeak=15.0"
    "Sharding.AccumulationAndCheckpointingTrainAsReplicated=16.2"
    "Gloo/ShardingAtWorld.EachModeTrainsAsReplicatedAndHoldsWhatItsFormulaSays/world4  # GetParam() = world4=15.8"
    "HtmlInBrowser.EveryGroupsPlotsAreDrawnWithoutAConsoleMessage=13.7"
    "Sharding.AModelWhoseWeightsExceedTheDeviceTrainsUnderZeroThree=11.6"
    "Capacity.TheSearchsReportIsTheRunOfItsAnswerStartedAlone=10.1"
    "Remedies.OptimizerStateRemediesHoldWhatTheirFormulasSay=10.0"
    "Sharding.TheSeedsClaimsHoldPerRank=9.5"
    "HostileFiles.ConcurrentRunsIntoOneOutputNeverLoseAReport=8.9"
    "DistributedWorld4.ARankKilledMidRunStopsTheOtherThree=8.8"
    "Gloo/ShardingAtWorld.EachModeTrainsAsReplicatedAndHoldsWhatItsFormulaSays/world2  # GetParam() = world2=8.6"
    "DistributedCpu.APeerThatDiesMidRunStopsTheOthers=8.6"
    "ConfirmingRuns.EverySuggestionForEachCpuFixtureRunsAndOverwritesNothing=7.9"
    "DistributedWorld4.ShardingKeepsAboutTwoQuartersOfTheParametersPerRank=7.6"
    "Front.BothRunnersWriteTheSameReportOfACpuRun=6.0"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/beta  # GetParam() = beta=5.8"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/epsilon  # GetParam() = epsilon=4.7"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/delta  # GetParam() = delta=4.6"
    "Fixtures.EveryFixtureIsAValidReport=4.6"
    "DiagnosticsCpu.SeedReferenceCommandsRunAsWritten=4.4"
    "FindMaxBatch.AnInterruptedSearchKeepsWhatItFound=4.3"
    "HostileOutcomes.TheHostRefusingMemoryUnderASimulatedLimitIsNotTheLimitsOutOfMemory=4.2"
    "HostileSignals.ASignalWhileALargePlanResolvesIsHonoured=4.0"
    "DistributedCpu.ShardedOptimizerStateIsHalfPerRank=3.8"
    "ConfirmingRuns.AnOutOfMemoryRunBoundsWhatFitsAndTheSearchItSuggestsFindsIt=3.6"
    "HostileRender.RandomBytesInEveryStringStayInsideEveryFormat=3.6"
    "Remedies.ActivationRemediesShrinkAlphaAndKeepItsTraining=3.5"
    "DiagnosticsCpu.ReportsSayWhereAPythonJobWouldReadOtherwise=3.4"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/alpha  # GetParam() = alpha=3.3"
    "DistributedCpu.APeerThatNeverJoinsFailsWithinTheTimeout=3.2"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/own  # GetParam() = own=3.1"
    "DiagnosticsCpu.TermAndHangupStopTheRunLikeCtrlC=3.0"
    "TensorParallel.AccumulationSplitAndSgdTrainAsOneProcess=3.0"
    "Remedies.OffloadingActivationsMovesThemAndTheSourcesSplittingDoesNot=2.9"
    "DistributedCpu.RanksOnOneHostShareItsCoresUnlessOmpNumThreadsChose=2.7"
    "TensorParallel.TheComparerSetsItBesideDdpAndZeroThreePerRank=2.6"
    "Sharding.ATiedHeadTrainsUnderZeroThree=2.5"
    "Sweeps.IsolateRunsEachInAChildAndWritesTheSameReports=2.5"
    "EveryCase/CapacityModel.APredictionFromOneRunIsWithinTwoPercentOfTheSearch/gamma  # GetParam() = gamma=2.5"
    "DistributedCpu.TwoRanksOverGlooWithPersistentGradientBuckets=2.4"
    "Remedies.CompareMeasuresEachAgainstTheBaselineAndNamesTheBest=2.4"
    "Example.HelpTeachesAndAFlagIsNotAFileName=2.4"
    "Sweeps.IsolateForwardsEveryStopSignalAndLeavesNoChildBehind=2.4"
    "Sweeps.AChildProcessReplacesWhatItsParentWasToldToOverwrite=2.3"
    "Remedies.SgdRemovesBetasOptimizerStateAndEmptyCacheIsANoteOnTheCpu=2.2"
    "TransformerCases/SequenceCapacityModel.TheLongestLengthPredictedCompletesAndALongerOneRunsOut/own_math  # GetParam() = own_math=2.1"
    "FindMaxBatch.GradientAccumulationStartsTheSearchAtItsMicroBatches=2.1"
    "TransformerCases/SequenceCapacityModel.TheLongestLengthPredictedCompletesAndALongerOneRunsOut/delta_fused  # GetParam() = delta_fused=2.0"
    "DiagnosticsCpu.ATransformerTrainsAndTheFusedKernelDropsTheQuadraticScores=1.9"
    "Gloo/TensorParallelAtWorld.TrainsAsOneProcessAndEachRankHoldsItsSlice/world4  # GetParam() = world4=1.9"
    "ConfirmingRuns.ACaseFromAFileIsRerunFromThatFile=1.9"
    "TransformerCases/SequenceCapacityModel.TheLongestLengthPredictedCompletesAndALongerOneRunsOut/delta_math  # GetParam() = delta_math=1.8"
    "HostileSignals.FindMaxBatchInterruptedInItsFirstTryWritesThatTry=1.8"
    "Sweeps.CtrlCStopsTheSweepAndKeepsTheReportsWritten=1.8"
    "Sharding.ZeroThreeFreesTheUnshardedParametersBetweenForwardAndBackward=1.8"
    "DistributedWorld4.RankZeroExtraSamplesMakeRankZeroTheConstraint=1.7"
    "DiagnosticsCpu.InterruptWritesAnInterruptedReport=1.6"
    "DistributedCpu.RankZeroExtraSamplesMakeRankZeroTheConstraint=1.6"
    "DistributedWorld4.EqualWorkloadsGiveEqualFiguresOnEveryRank=1.5"
    "HostileSignals.ASecondSignalDuringConfirmationLeavesNoFolderNoChildNoTemporary=1.5"
    "Capacity.ThePredictedLargestBatchIsWithinTwoPercentOfWhatFits=1.5"
    "FindMaxBatch.FindsConfirmsAndAgreesWithThePrediction=1.5"
    "Sweeps.TheReadmeExampleRunsAsWritten=1.3"
    "Gloo/TensorParallelAtWorld.TrainsAsOneProcessAndEachRankHoldsItsSlice/world2  # GetParam() = world2=1.3"
    "DiagnosticsCpu.BetaOptimizerStateAppearsAtFirstStepAndStays=1.2"
    "OutputPaths.SpecialFilesAreWrittenIntoNotReplacedAndLinksAreWrittenThrough=1.2"
    "HostileFiles.ReusingAnOutputDirectoryNeverReplacesAnotherConfigurationsReport=1.1"
    "HostileSignals.AClosedPipeIsAWriteErrorAndTheReportStays=1.1"
    "TensorParallel.AutocastKeepsTheRowParallelOutputInBf16=1.1"
    "HostileTermination.IsolateWithAFifoOutputEnds=1.0"
    "DistributedCpu.ASweepWalksTheSameListOnEveryRank=1.0")
  string(REGEX REPLACE "=[0-9.]+$" "" _memdiag_name "${_memdiag_cost}")
  string(REGEX REPLACE "^.*=" "" _memdiag_seconds "${_memdiag_cost}")
  set_tests_properties("${_memdiag_name}" PROPERTIES COST ${_memdiag_seconds})
endforeach()

# The slow tier's discovered member (tests/CMakeLists.txt says what the tier
# is): every sharded mode's per-rank capacity against the runs that find it,
# 51-61 s of the 2-core machine.
# (set, not appended: ctest's script mode has no if(TEST); its suite's label
# is integration.)
set_tests_properties("Sharding.ThePerRankCapacityOfEachModeIsWhatRunsFind" PROPERTIES LABELS "integration;slow")
