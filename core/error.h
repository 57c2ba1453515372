#pragma once
// Errors raised by the rlflow libraries. Libraries never print or exit: they
// throw rlflow::Error with a one-line message naming the problem, and the
// binaries turn it into "error: <message>" and a non-zero exit code.
#include <sstream>
#include <stdexcept>
#include <string>

namespace rlflow {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
};

// Thrown for valid ONNX that the registry cannot run as configured (e.g.
// Dropout in training mode): the importer keeps such a node opaque instead of
// refusing the model.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// Builds the message from stream-able parts: Fail("node '", name, "' ...").
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

#define RLFLOW_CHECK(cond, ...)               \
  do {                                        \
    if (!(cond)) ::rlflow::Fail(__VA_ARGS__); \
  } while (0)

// First line of a (possibly multi-line) message, trimmed.
std::string FirstLine(const std::string& text);

}  // namespace rlflow
