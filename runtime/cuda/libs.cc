#include "runtime/cuda/libs.h"

#include <dlfcn.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace rlflow::cuda {
namespace {

#define RLFLOW_CUDA_STRINGIZE_INNER(x) #x
// Stringizes after macro expansion: cublasCreate is cuBLAS v2's macro for
// the exported cublasCreate_v2.
#define RLFLOW_CUDA_STRINGIZE(x) RLFLOW_CUDA_STRINGIZE_INNER(x)

void* Open(const char* name, const char* fallback_dir, std::string* error) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr && fallback_dir != nullptr)
    h = dlopen((std::string(fallback_dir) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr && error->empty()) {
    const char* why = dlerror();
    *error = std::string("cannot load ") + name + ": " + (why != nullptr ? why : "not found");
  }
  return h;
}

CudaLibs Load() {
  CudaLibs libs;
  // Not on the loader's path by default: the toolkit's own directory next.
  void* cublas = Open(kCublasLibrary, RLFLOW_CUDA_LIB_DIR, &libs.error);
  void* cudnn = Open(kCudnnLibrary, RLFLOW_CUDA_LIB_DIR, &libs.error);
  if (cublas == nullptr || cudnn == nullptr) return libs;
#define RLFLOW_CUDA_LIB_LOAD(name)                                                                             \
  {                                                                                                            \
    const char* symbol = RLFLOW_CUDA_STRINGIZE(name);                                                          \
    void* f = dlsym(symbol[3] == 'l' ? cublas : cudnn, symbol); /* "cublas..." vs "cudnn..." */                \
    if (f == nullptr) {                                                                                        \
      libs.error =                                                                                             \
          std::string("cannot find ") + symbol + " in " + (symbol[3] == 'l' ? kCublasLibrary : kCudnnLibrary); \
      return libs;                                                                                             \
    }                                                                                                          \
    libs.name = reinterpret_cast<decltype(libs.name)>(f);                                                      \
  }
  RLFLOW_CUDA_LIB_FUNCTIONS(RLFLOW_CUDA_LIB_LOAD)
#undef RLFLOW_CUDA_LIB_LOAD
  libs.loaded = true;
  return libs;
}

}  // namespace

const CudaLibs& Libs() {
  static const CudaLibs libs = Load();
  return libs;
}

}  // namespace rlflow::cuda
