"""cuda_library: compiles .cu files with the toolkit's nvcc into a cc_library."""

load("@cuda//:defs.bzl", "CUDA_AVAILABLE", "CUDA_ROOT", "NVCC")

# sm_75 is nvcc 13's lowest architecture; sm_90 is the H100 / H200.
CUDA_ARCHS = ["75", "90"]

def cuda_library(name, srcs, hdrs = [], deps = [], tags = [], cudart = "//third_party:cudart_static", **kwargs):
    """`cudart`: the CUDA runtime to link (static by default: nothing is loaded at start-up)."""
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".pic.o")
        gencode = " ".join(["-gencode arch=compute_%s,code=sm_%s" % (a, a) for a in CUDA_ARCHS])
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = "%s -std=c++17 -O2 -Xcompiler -fPIC %s -I. -I$(GENDIR) -c $(location %s) -o $@" % (NVCC, gencode, src),
            tags = tags + ([] if CUDA_AVAILABLE else ["manual"]),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        # Never a shared library of its own (tests link dynamically): the
        # static CUDA runtime it calls is linked into the executable.
        linkstatic = 1,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + [cudart],
        tags = tags + ([] if CUDA_AVAILABLE else ["manual"]),
        **kwargs
    )

def cuda_tags(tags = []):
    """Tags for a target that needs the CUDA toolkit to build."""
    return tags + ([] if CUDA_AVAILABLE else ["manual"])

CUDA_LINKOPTS = [
    "-L%s/lib64" % CUDA_ROOT,
    "-Wl,-rpath,%s/lib64" % CUDA_ROOT,
    "-lcudnn",
    "-lcublas",
    "-lcudart",
] if CUDA_AVAILABLE else []

# The CUDA runtime linked statically (it loads the driver, libcuda.so.1,
# itself on first use): a binary that links it starts as fast as without
# CUDA, and runs on machines without a driver. cuBLAS and cuDNN are then
# loaded on demand (runtime/cuda/libs.h).
CUDART_STATIC_LINKOPTS = [
    "-L%s/lib64" % CUDA_ROOT,
    "-lcudart_static",
    "-ldl",
    "-lrt",
    "-lpthread",
] if CUDA_AVAILABLE else []
