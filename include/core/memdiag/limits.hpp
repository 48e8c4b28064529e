// The bounds a report's figures must stay within, shared by the writer's
// callers and the reader so that what one writes the other accepts.
#pragma once

#include <cstdint>

namespace memdiag::limits {

// Largest MiB figure believed: 1 PiB. Anything larger is a unit mistake or
// corruption, not a GPU.
inline constexpr double kAbsurdMiB = 1024.0 * 1024.0 * 1024.0;
// Integers a report carries are read exactly through a double by JSON tools
// (Python's json, jq): 2^53 is the largest such.
inline constexpr std::int64_t kMaxExactInteger = std::int64_t{1} << 53;
inline constexpr std::int64_t kMaxSteps = 10'000'000;
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 30;
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 20;
// A model dimension in a case file (input, hidden, output), its depth, and
// the parameters they make together: 2^36 float32 weights are 256 GiB,
// more than any one device holds.
inline constexpr std::int64_t kMaxDimension = std::int64_t{1} << 30;
// A case's batch schedule: entries, one per step, repeated.
inline constexpr std::size_t kMaxScheduleLength = 10'000;
// Tokens per sample of a transformer case.
inline constexpr std::int64_t kMaxSequenceLength = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxDepth = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxParameters = std::int64_t{1} << 36;
// A try of a capacity search longer than this (s, about 31 years) is a
// corrupt clock.
inline constexpr double kMaxSeconds = 1e9;
// A report or case file larger than this is not one (or is /dev/zero): it
// is refused after reading this much, not read until memory runs out. A
// report of 100,000 steps is about 60 MiB.
inline constexpr std::int64_t kMaxInputBytes = std::int64_t{256} << 20;
// JSON nested deeper than this is refused before it is parsed: copying or
// printing a deeper value recurses (about 90,000 levels overflowed the stack).
inline constexpr int kMaxJsonDepth = 512;
// A phase longer than this (ms, about 31 years) is a corrupt clock.
inline constexpr double kMaxElapsedMs = 1e12;
// Peak below allocated by more than this (MiB) is an inconsistent sample;
// less is rounding in the writer.
inline constexpr double kPeakSlackMiB = 1e-6;

// --max-increase as a fraction: beyond a thousandfold growth the gate means
// nothing (and a typo such as 5000 for 5% is caught).
inline constexpr double kMaxIncreaseFraction = 1000;
// --dist-timeout-s: a day; longer is a hung job, and the value must fit a
// std::chrono::milliseconds count.
inline constexpr double kMaxTimeoutSeconds = 86400;

}  // namespace memdiag::limits
