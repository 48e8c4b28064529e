// Report names: the one place file names are made from runs, for --output
// templates, --output-dir, plan entries, ranks, --find-max-batch and the
// comparer's confirming runs. Every part that comes from input (a case,
// preset, remedy or plan entry name) goes through one sanitiser, so a name
// can neither leave its directory nor carry a character a shell, a terminal
// or another file system would read differently.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace memdiag {

// A name from a case file, a plan or a flag made safe as (part of) one file
// name: ASCII letters, digits and "._-=+" kept, anything else (a '/', a
// space, a control character, any non-ASCII byte) as '_'; a leading '.'
// (hidden, or "..") gets a '_' before it; at most kMaxFileNamePart bytes;
// empty becomes "_".
inline constexpr std::size_t kMaxFileNamePart = 96;
std::string file_name_part(const std::string& name);

// What a run is called, for output names and progress lines.
struct RunLabel {
  std::string name;  // a plan's entry name, or empty
  std::string case_name;
  std::string preset;
  int batch = 0;
  int steps = 0;
  std::string remedy = "none";  // remedies_label of the run's remedies
  int sequence_length = 0;  // a transformer's; 0 for a model without a sequence
};

// Which settings differ between the runs of a sweep that share a case.
struct Varying {
  bool case_name = false;
  bool preset = false;
  bool batch = false;
  bool steps = false;
  bool sequence = false;
  bool remedy = false;
};
// Linear in the number of runs (memdiag/run_identity.hpp's varying_aspects).
Varying varying(const std::vector<RunLabel>& runs);

// --output with placeholders: {case}, {preset}, {batch}, {steps}, {remedy},
// {name} are replaced, names sanitised; {rank} is kept for
// output_for_rank. Throws UsageError for any other {word}.
std::string expand_output(const std::string& templ, const RunLabel& run);
// The known placeholders, for --help and error messages.
const char* output_placeholders();

// A file name from the case and the settings that vary: alpha.json,
// alpha-batch4.json, beta-medium.json, gamma-steps10.json; a plan's entries
// are named by their name.
std::string default_output_name(const RunLabel& run, const Varying& v);
// --find-max-batch's default: <case>-max-batch.json.
std::string max_batch_output_name(const RunLabel& run);

// "alpha batch 4", "beta preset medium", or a plan entry's name: a run as a
// progress line names it (names kept as given; printing makes them safe).
std::string describe_run(const RunLabel& run, const Varying& v);

// The report path of one rank: "{rank}" is replaced by the rank; without
// it, a world of more than one gets "-rankK" before the extension.
std::string output_for_rank(const std::string& output, int rank, int world_size);

// A path dir/<stem><-N><suffix>.json (stem sanitised; N from 2 on) whose
// normal form is not in taken, which it is then added to. suffix is
// appended as given ("-{rank}" for a command every rank runs).
std::string unique_output(const std::string& dir, const std::string& stem, std::set<std::string>& taken,
                          const std::string& suffix = "");
// The lexically normal form unique_output compares.
std::string normal_path(const std::string& path);

}  // namespace memdiag
