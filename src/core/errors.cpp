#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"

namespace memdiag {

InputError::InputError(std::string source, std::string path, std::string message)
    // One line whatever the file is called or the message quotes: the
    // source is a file name (bytes), the message may quote a file's text.
    // An empty path: the file itself (it is missing, a directory, unreadable).
    : Error(printable(source) + ": " + (path.empty() ? "" : printable(path) + ": ") + printable(message)),
      source_(std::move(source)),
      path_(std::move(path)),
      message_(std::move(message)) {}

}  // namespace memdiag
