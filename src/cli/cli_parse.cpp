#include "cli_parse.hpp"

#include "memdiag/exit_code.hpp"
#include "memdiag/format.hpp"

namespace memdiag::cli {

std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& program, std::ostream& out,
                         std::ostream& err) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    const int code = app.exit(e, out, err);
    // --help > /dev/full is a failed write, not a success.
    if (!(out << std::flush)) return to_int(ExitCode::kFailed);
    return code;
  } catch (const CLI::ParseError& e) {
    // One line, whatever the argument held (CLI11 quotes it as given).
    err << program << ": " << printable(e.what()) << " (see --help)\n";
    return to_int(ExitCode::kUsage);
  }
  return std::nullopt;
}

}  // namespace memdiag::cli
