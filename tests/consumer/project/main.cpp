// Reads a report with memdiag::core and diagnoses it with memdiag::analysis,
// as a project outside the repository would.
#include <memdiag/analysis.hpp>
#include <memdiag/report_reader.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const memdiag::ReadResult r = memdiag::read_report_file(argv[1]);
  if (r.error) {
    std::cerr << r.error->what() << "\n";
    return 2;
  }
  const memdiag::Analysis a = memdiag::analyse({{argv[1], *r.report}});
  std::cout << "consumer: " << a.verdicts.at(0).case_name << " is " << memdiag::to_string(a.verdicts.at(0).dominant)
            << "\n";
  return 0;
}
