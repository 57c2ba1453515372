#!/usr/bin/python3
"""A long chain model, for the search's cost on large graphs.

Writes an ONNX model of BLOCKS blocks, each MatMul (16x16 weight), Add (its
own 16-element bias), Relu and a pair of Transposes that cancel (as
converters leave them): 5 * BLOCKS + 1 nodes on an [8, 16] input "x".
docs/optimiser.md (*Large graphs*) measures taso on 400 and 4000 blocks:

  /usr/bin/python3 benchmarks/make_chain_model.py 400 /tmp/chain400.onnx
  ./bazelw run //optimiser -- --model=/tmp/chain400.onnx --timing_cache=none

A measurement for the docs, not part of the build.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    blocks, out = int(sys.argv[1]), sys.argv[2]
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        inits += [numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.25).astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
                  helper.make_node("Transpose", [f"r{i}"], [f"t{i}"], perm=[1, 0]),
                  helper.make_node("Transpose", [f"t{i}"], [f"u{i}"], perm=[1, 0])]
        x = f"u{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print(f"wrote {out}: {len(nodes)} nodes", file=sys.stderr)


if __name__ == "__main__":
    main()
