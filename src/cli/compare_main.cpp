// compare_memory_reports: flags in, memdiag::run_compare out.
#include "compare.hpp"
#include "compare_flags.hpp"
#include "signals.hpp"

#include <iostream>

int main(int argc, char** argv) {
  memdiag::cli::install_stop_signals();  // SIGPIPE ignored: a closed pipe is a write error
  memdiag::CompareOptions opts;
  if (const auto code = memdiag::parse_compare_flags(argc, argv, opts, std::cout, std::cerr)) return *code;
  return opts.check ? memdiag::run_check(opts, std::cout, std::cerr) : memdiag::run_compare(opts, std::cout, std::cerr);
}
