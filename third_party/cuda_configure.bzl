"""Finds the CUDA toolkit (default /usr/local/cuda, or $CUDA_PATH).

Creates @cuda with:
  //:headers      the toolkit's include/ tree (empty when no toolkit)
  //:defs.bzl     CUDA_AVAILABLE, NVCC (absolute path or "")
A machine without the toolkit still builds everything else: CUDA targets are
tagged "manual" there (see //third_party:cuda.bzl).
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(root + "/bin/nvcc")
    available = nvcc.exists and ctx.path(root + "/include/cuda_runtime.h").exists
    if available:
        ctx.symlink(root + "/include", "include")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
# include/** (not *.h): some CCCL headers have no extension (nv/target).
cc_library(
    name = "headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)
""")
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "headers")
""")
    ctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nCUDA_ROOT = %r\nNVCC = %r\n" % (
        "True" if available else "False",
        root if available else "",
        str(nvcc) if available else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
