// main() for a fuzz target built without libFuzzer: runs the target once on
// each file named on the command line (e.g. to reproduce a crash).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/fuzz/fuzz_target.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE...\n", argv[0]);
    return 2;
  }
  for (int k = 1; k < argc; ++k) {
    std::ifstream f(argv[k], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "error: cannot read '%s'\n", argv[k]);
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    std::string data = ss.str();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    std::printf("ok: %s\n", argv[k]);
  }
  return 0;
}
