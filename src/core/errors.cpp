#include "memdiag/errors.hpp"

namespace memdiag {

InputError::InputError(std::string source, std::string path, std::string message)
    : Error(source + ": " + path + ": " + message),
      source_(std::move(source)),
      path_(std::move(path)),
      message_(std::move(message)) {}

}  // namespace memdiag
