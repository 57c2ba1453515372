#!/usr/bin/python3
"""Writes a model over 2 GB with its weights in an external data file, the
way onnx.save_model(save_as_external_data=True) writes one: nine MatMul+Relu
layers of 8192x8192 float32 weights (2.4 GB in <out_dir>/big.weights), input
x [N, 8192], and a Transpose pair at the end that the optimiser removes (so
that the optimised graph, not only the original, goes through the >2 GB
paths). Run with Debian's Python:

  /usr/bin/python3 zoo/make_big_model.py --out_dir=/tmp/big
  ./bazelw run //optimiser -- --model=/tmp/big/big.onnx --output=/tmp/big/out.onnx --input_shape=x:4,8192
"""
import argparse
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--layers", type=int, default=9)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    inits, nodes, prev = [], [], "x"
    for k in range(args.layers):
        w = rng.standard_normal((8192, 8192), dtype=np.float32) / 90.0
        inits.append(numpy_helper.from_array(w, "W%d" % k))
        nodes.append(helper.make_node("MatMul", [prev, "W%d" % k], ["m%d" % k]))
        nodes.append(helper.make_node("Relu", ["m%d" % k], ["r%d" % k]))
        prev = "r%d" % k
    nodes.append(helper.make_node("Transpose", [prev], ["t"], perm=[1, 0]))
    nodes.append(helper.make_node("Transpose", ["t"], ["y"], perm=[1, 0]))
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8192])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 8192])
    model = helper.make_model(helper.make_graph(nodes, "big", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.save_model(model, os.path.join(args.out_dir, "big.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="big.weights", size_threshold=1024)
    print("wrote", os.path.join(args.out_dir, "big.onnx"), "and big.weights")


if __name__ == "__main__":
    main()
