#include "cli_parse.hpp"

#include "memdiag/exit_code.hpp"

namespace memdiag::cli {

std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& program, std::ostream& out,
                         std::ostream& err) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << program << ": " << e.what() << " (see --help)\n";
    return to_int(ExitCode::kUsage);
  }
  return std::nullopt;
}

}  // namespace memdiag::cli
