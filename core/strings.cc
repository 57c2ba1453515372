#include "core/strings.h"

namespace rlflow {

std::vector<std::string> SplitList(const std::string& list, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(separator, start);
    if (end == std::string::npos) end = list.size();
    const size_t b = list.find_first_not_of(" \t", start);
    if (b != std::string::npos && b < end) {
      const size_t e = list.find_last_not_of(" \t", end - 1);
      out.push_back(list.substr(b, e - b + 1));
    }
    start = end + 1;
  }
  return out;
}

}  // namespace rlflow
