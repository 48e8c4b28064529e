// The CUDA probe against known allocations, in-process. Skips, saying why,
// where CUDA is absent. The executable's behaviour on CUDA is tested in
// test_cuda_cli.cpp, a process that never initialises CUDA itself.
#include "memdiag/probes.hpp"

#include <torch/cuda.h>
#include <torch/types.h>

#include <gtest/gtest.h>

using namespace memdiag;

#define REQUIRE_CUDA()                                                                        \
  do {                                                                                        \
    if (!cuda_probe_compiled()) GTEST_SKIP() << "built against LibTorch without CUDA";        \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device available on this host"; \
  } while (0)

TEST(CudaProbe, SeesAKnownAllocationExactly) {
  REQUIRE_CUDA();
  auto probe = make_cuda_probe(0);
  const ProbeReading before = probe->read();
  torch::Tensor t = torch::empty({64 << 20}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kByte));
  const ProbeReading after = probe->read();
  EXPECT_DOUBLE_EQ(after.allocated_mib - before.allocated_mib, 64.0);
  ASSERT_TRUE(after.reserved_mib && after.device_used_mib && after.inactive_split_mib);
  EXPECT_GE(*after.reserved_mib, after.allocated_mib);
  EXPECT_GT(*after.device_used_mib, *after.reserved_mib);  // context and libraries sit outside
  probe->reset_peak();
  t = torch::Tensor();
  EXPECT_DOUBLE_EQ(probe->read().allocated_mib, before.allocated_mib);
}

