#include "cli_parse.hpp"

#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"
#include "memdiag/suggest.hpp"

#include <vector>

namespace memdiag::cli {

namespace {

// "unknown flag --bacth (did you mean --batch?)" for the first argument
// that looks like a flag among what CLI11 could not place; empty when
// none does (a stray value keeps CLI11's own words).
std::string unknown_flag(const CLI::App& app, const std::vector<std::string>& extras) {
  std::vector<std::string> flags;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;  // hidden: the runner's own, never suggested
    for (const std::string& l : o->get_lnames()) flags.push_back("--" + l);
  }
  for (const std::string& x : extras) {
    if (x.size() < 2 || x[0] != '-' || x == "-") continue;
    const std::string flag = x.substr(0, x.find('='));
    return "unknown flag " + flag + did_you_mean(flag, flags);
  }
  return {};
}

}  // namespace

std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& program, std::ostream& out,
                         std::ostream& err) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    const int code = app.exit(e, out, err);
    // --help > /dev/full is a failed write, not a success.
    if (!(out << std::flush)) return to_int(ExitCode::kFailed);
    return code;
  } catch (const CLI::ExtrasError& e) {
    const std::string flag = unknown_flag(app, app.remaining());
    err << program << ": " << printable(flag.empty() ? e.what() : flag) << " (see --help)\n";
    return to_int(ExitCode::kUsage);
  } catch (const CLI::ParseError& e) {
    // One line, whatever the argument held (CLI11 quotes it as given).
    err << program << ": " << printable(e.what()) << " (see --help)\n";
    return to_int(ExitCode::kUsage);
  }
  return std::nullopt;
}

}  // namespace memdiag::cli
