#include "memdiag/output_guard.hpp"

#include "memdiag/atomic_file.hpp"
#include "memdiag/report_reader.hpp"

#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

namespace memdiag {
namespace {

bool regular_file(const std::string& path, struct stat& st) {
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

void InputFiles::add(const std::string& path, const std::string& role) {
  struct stat st {};
  if (path.empty() || path == "-" || !regular_file(path, st)) return;
  files_.push_back(File{st.st_dev, st.st_ino, role + " " + path});
}

std::string InputFiles::find(const std::string& output) const {
  struct stat st {};
  if (!regular_file(output, st)) return {};
  for (const File& f : files_) {
    if (f.dev == st.st_dev && f.ino == st.st_ino) return f.described;
  }
  return {};
}

std::string check_output(const std::string& output, const InputFiles& inputs) {
  if (const std::string input = inputs.find(output); !input.empty()) {
    return "is " + input + " this run reads; name another file";
  }
  return check_writable(output);
}

std::string check_replaces_only_a_report(const std::string& output) {
  struct stat st {};
  if (!replaces_a_file(output) || !regular_file(output, st)) return {};
  if (st.st_size == 0) return {};  // empty: nothing of anyone's to lose
  // Reports start with '{' and carry "schema_version": a cheap look first,
  // then the reader's full rules (a file that merely looks like one, such
  // as a case file, does not pass them).
  std::ifstream in(output, std::ios::binary);
  char first = 0;
  while (in.get(first) && (first == ' ' || first == '\n' || first == '\t' || first == '\r')) {
  }
  if (first != '{') return "exists and is not a memdiag report; name another file";
  const ReadResult r = read_report_file(output);
  if (!r.report) return "exists and is not a memdiag report (a case or plan file?); name another file";
  return {};
}

}  // namespace memdiag
