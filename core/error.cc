#include "core/error.h"

namespace rlflow {

namespace {
std::string OneLine(const std::string& message) {
  std::string out = message;
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}
}  // namespace

Error::Error(const std::string& message) : std::runtime_error(OneLine(message)) {}

std::string FirstLine(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_first_of("\r\n", begin);
  std::string line = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

}  // namespace rlflow
