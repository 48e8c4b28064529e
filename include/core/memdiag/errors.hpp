// One error style for the whole project: every failure a user can act on is a
// memdiag::Error (a std::runtime_error) whose what() is one line. The type
// says which exit code it earns; the CLIs catch Error and nothing narrower
// unless they treat a kind differently.
#pragma once

#include <stdexcept>
#include <string>

namespace memdiag {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A flag, an option value or the launcher's environment is wrong. Nothing has
// run or been written yet (exit 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

// A file's content is wrong: a report or a case file. Names the file, the
// JSON path ($.presets.small.model.depth) and the problem; what() is
// "<source>: <path>: <message>".
class InputError : public Error {
 public:
  InputError(std::string source, std::string path, std::string message);
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  const std::string& message() const { return message_; }
  // The same error, read from another source (a parser that did not know the
  // file name throws with an empty source).
  InputError from(std::string source) const { return InputError(std::move(source), path_, message_); }

 private:
  std::string source_;
  std::string path_;
  std::string message_;
};

// A file could not be opened, written or moved into place; names the path
// and the system's reason.
class IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace memdiag
