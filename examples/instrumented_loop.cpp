// Instrumenting a training loop of your own with memdiag::Recorder.
//
//   build/bin/instrumented_loop -o my-loop.json
//   build/bin/compare_memory_reports my-loop.json
//
// The loop below is ordinary LibTorch: a two-layer regression model trained
// with Adam. The only memdiag lines are the probe, the recorder, one mark()
// per phase and the report at the end.
#include "memdiag/environment.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/tensor_census.hpp"

#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <iostream>

int main(int argc, char** argv) {
  // The report's path: -o/--output FILE (or FILE alone); a flag is not a file name.
  const char* usage = "usage: instrumented_loop [-o REPORT.json]   (default instrumented_loop.json)";
  std::string output = "instrumented_loop.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage << "\nTrains a 2-layer MLP for 5 steps, recorded with memdiag::Recorder; read the report "
                            "with compare_memory_reports REPORT.json.\n";
      return 0;
    }
    if ((a == "-o" || a == "--output") && i + 1 < argc) {
      output = argv[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      output = a.substr(9);
    } else if (a.empty() || a[0] == '-' || argc > 2) {
      std::cerr << "instrumented_loop: " << (a == "-o" || a == "--output" ? a + " needs a file" : "unknown argument " + a)
                << ": " << usage << " (see --help)\n";
      return 2;
    } else {
      output = a;
    }
  }
  const bool cuda = torch::cuda::is_available();
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);

  // The probe first: on the CPU it installs the tracking allocator, which
  // only sees tensors allocated after it.
  auto probe = cuda ? memdiag::make_cuda_probe(0) : memdiag::make_cpu_probe();
  memdiag::Recorder rec(*probe);
  memdiag::Report& meta = rec.report();
  meta.case_info.name = "example-regression";
  meta.case_info.description = "examples/instrumented_loop.cpp: 2-layer MLP regression with Adam";
  meta.config.batch_size_per_device = 64;
  meta.config.preset = "example";
  meta.config.steps = 5;
  meta.config.device = device.str();
  meta.environment = memdiag::describe_environment(device);

  torch::nn::Sequential model(torch::nn::Linear(512, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1));
  model->to(device);
  const auto params = model->parameters();
  for (const auto& p : params) {
    meta.model.parameters += p.numel();
    meta.model.parameter_bytes += static_cast<std::int64_t>(p.numel() * p.element_size());
  }
  rec.mark(memdiag::Phase::kModelReady, memdiag::take_census(params, nullptr));

  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-3));
  rec.mark(memdiag::Phase::kOptimizerReady, memdiag::take_census(params, &opt));

  double loss_sum = 0;
  for (int step = 0; step < meta.config.steps; ++step) {
    rec.begin_step(step);
    torch::Tensor x = torch::randn({64, 512}, device);
    torch::Tensor y = torch::randn({64, 1}, device);
    torch::Tensor loss = torch::nn::functional::mse_loss(model->forward(x), y);
    rec.mark(memdiag::Phase::kForward, memdiag::take_census(params, &opt));
    loss.backward();
    rec.mark(memdiag::Phase::kBackward, memdiag::take_census(params, &opt));
    opt.step();
    rec.mark(memdiag::Phase::kStep, memdiag::take_census(params, &opt));
    opt.zero_grad(true);
    loss_sum += loss.item<double>();  // a detached scalar, not the graph
    x = y = loss = torch::Tensor();
    rec.mark(memdiag::Phase::kCleanup, memdiag::take_census(params, &opt));
  }

  memdiag::write_report(output, rec.finish(memdiag::RunStatus::kComplete));
  std::cout << "mean loss " << loss_sum / meta.config.steps << "; wrote " << output << "\n";
  return 0;
}
