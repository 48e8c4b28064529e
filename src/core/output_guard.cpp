#include "memdiag/output_guard.hpp"

#include "memdiag/atomic_file.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/run_identity.hpp"

#include <fstream>
#include <map>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

namespace memdiag {
namespace {

bool regular_file(const std::string& path, struct stat& st) {
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A file as a check saw it; nullopt: nothing there.
struct FileState {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec modified, changed;
  bool operator==(const FileState& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && modified.tv_sec == o.modified.tv_sec &&
           modified.tv_nsec == o.modified.tv_nsec && changed.tv_sec == o.changed.tv_sec &&
           changed.tv_nsec == o.changed.tv_nsec;
  }
};

std::optional<FileState> state_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileState{st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

// What this process knows is at each output it checked or wrote.
std::map<std::string, std::optional<FileState>>& known_outputs() {
  static std::map<std::string, std::optional<FileState>> known;
  return known;
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

void remember_output(const std::string& output) { known_outputs()[output] = state_of(output); }

GuardedWrite write_own_report(const std::string& output, const Report& report) {
  const GuardedWrite w = write_file_guarded(output, dump_report(report), [&]() -> std::string {
    const auto known = known_outputs().find(output);
    const std::optional<FileState> now = state_of(output);
    if (known != known_outputs().end() && known->second && now && *known->second == *now) return {};
    // Written by someone else since this run's checks.
    const ReadResult there = read_report_file(output);
    if (!there.report) return "a file that is not a memdiag report appeared there while this run ran";
    const RunIdentity theirs = identity_of(*there.report), mine = identity_of(report);
    if (same(projection::kBaselineMatch, theirs, mine)) return {};
    return "another run wrote a report of another configuration there while this one ran (" +
           describe(projection::kBaselineMatch, theirs) + "); this run is " +
           describe(projection::kBaselineMatch, mine);
  });
  if (w.refused.empty()) remember_output(output);
  return w;
}

}  // namespace memdiag
