#!/usr/bin/python3
"""Writes rlflow's corpus of malformed and unusual ONNX models.

Small, valid seed models (CNN with batch norm, a dynamic batch, shape
arithmetic, attention-like MatMuls, opaque custom ops, ...) and, from a fixed
seed, mutations of them: byte flips and truncations of the file, and
structural edits (zero / negative / huge strides, pads and dims, axes out of
range, wrong attribute types, missing and undefined inputs, cycles, nodes out
of order, huge initializer and Expand shapes, bad element types, opsets and
IR versions). The optimiser must answer each with a clean result or one
'error:' line: never a signal, a hang or a partial output file.

  /usr/bin/python3 tools/fuzz/make_corpus.py --out=corpus.bin [--count=520] [--seed=1] [--dir=DIR]

corpus.bin holds the models one after another, each as a line
'<name> <size>' followed by <size> bytes. --dir also writes them as files
(the fuzzers' seed corpus is made this way).
"""
import argparse
import copy
import os
import random
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def rnd(shape, rng, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=13, ir=8, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, producer_name="corpus")
    m.ir_version = ir
    return m


def seeds(rng):
    out = {}
    # A small CNN: conv + batch norm + relu + pooling + classifier.
    inits = [numpy_helper.from_array(rnd((8, 3, 3, 3), rng), "w1"), numpy_helper.from_array(rnd((8,), rng), "b1"),
             numpy_helper.from_array(np.abs(rnd((8,), rng)) + 0.5, "s"), numpy_helper.from_array(rnd((8,), rng), "t"),
             numpy_helper.from_array(rnd((8,), rng), "m"), numpy_helper.from_array(np.abs(rnd((8,), rng)) + 0.5, "v"),
             numpy_helper.from_array(rnd((8, 8, 1, 1), rng), "w2"), numpy_helper.from_array(rnd((4, 8), rng), "fc"),
             numpy_helper.from_array(rnd((4,), rng), "fcb")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("BatchNormalization", ["c1", "s", "t", "m", "v"], ["bn"], name="bn1"),
             helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2"),
             helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat", axis=1),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="fc", transB=1)]
    out["cnn"] = model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                       [helper.make_tensor_value_info("y", F, [1, 4])], inits)
    out["cnn_dynamic"] = model(nodes, [helper.make_tensor_value_info("x", F, ["N", 3, 8, 8])],
                               [helper.make_tensor_value_info("y", F, ["N", 4])], inits)
    # Shape arithmetic on a dynamic batch: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    sh_inits = [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
                numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0"),
                numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1"),
                numpy_helper.from_array(rnd((12, 6), rng), "wm"), numpy_helper.from_array(rnd((6,), rng), "bm")]
    sh_nodes = [helper.make_node("Shape", ["x"], ["shp"], name="shape"),
                helper.make_node("Gather", ["shp", "zero"], ["n"], name="gather", axis=0),
                helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsq"),
                helper.make_node("Concat", ["n1", "minus1"], ["tgt"], name="concat", axis=0),
                helper.make_node("Reshape", ["x", "tgt"], ["flat"], name="reshape"),
                helper.make_node("MatMul", ["flat", "wm"], ["mm"], name="matmul"),
                helper.make_node("Add", ["mm", "bm"], ["a"], name="add"),
                helper.make_node("Softmax", ["a"], ["y"], name="softmax", axis=-1)]
    out["shape_dynamic"] = model(sh_nodes, [helper.make_tensor_value_info("x", F, ["batch", 3, 4])],
                                 [helper.make_tensor_value_info("y", F, ["batch", 6])], sh_inits)
    # Attention-like block: Q/K/V MatMuls, transpose, scale, softmax.
    at_inits = [numpy_helper.from_array(rnd((8, 8), rng), n) for n in ("wq", "wk", "wv")] + [
        numpy_helper.from_array(np.array(0.35, dtype=np.float32), "scale")]
    at_nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
                helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
                helper.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
                helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
                helper.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
                helper.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
                helper.make_node("Softmax", ["ss"], ["p"], name="softmax", axis=2),
                helper.make_node("MatMul", ["p", "v"], ["y"], name="pv")]
    out["attention"] = model(at_nodes, [helper.make_tensor_value_info("x", F, [1, 5, 8])],
                             [helper.make_tensor_value_info("y", F, [1, 5, 8])], at_inits)
    # Data movement: Concat / Split / Transpose / Expand / ConstantOfShape / Range / Pad.
    dm_inits = [numpy_helper.from_array(np.array([3, 3], dtype=np.int64), "split"),
                numpy_helper.from_array(np.array([2, 6, 4], dtype=np.int64), "eshape"),
                numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 1], dtype=np.int64), "pads")]
    dm_nodes = [helper.make_node("Concat", ["x", "x"], ["cc"], name="cat", axis=1),
                helper.make_node("Split", ["cc", "split"], ["s0", "s1"], name="split", axis=1),
                helper.make_node("Add", ["s0", "s1"], ["a"], name="add"),
                helper.make_node("Transpose", ["a"], ["t"], name="tr", perm=[0, 2, 1]),
                helper.make_node("Transpose", ["t"], ["t2"], name="tr2", perm=[0, 2, 1]),
                helper.make_node("Expand", ["t2", "eshape"], ["e"], name="expand"),
                helper.make_node("Pad", ["e", "pads"], ["pd"], name="pad"),
                helper.make_node("Relu", ["pd"], ["y"], name="relu")]
    out["datamove"] = model(dm_nodes, [helper.make_tensor_value_info("x", F, [1, 3, 4])],
                            [helper.make_tensor_value_info("y", F, [2, 6, 6])], dm_inits)
    # An op from a custom domain between modelled ops (kept opaque).
    cu_nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
                helper.make_node("BatchNormalization", ["c1", "s", "t", "m", "v"], ["bn"], name="bn1"),
                helper.make_node("MyRelu", ["bn"], ["r1"], name="custom", domain="com.example"),
                helper.make_node("Relu", ["r1"], ["y"], name="relu")]
    out["custom_op"] = model(cu_nodes, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                             [helper.make_tensor_value_info("y", F, [1, 8, 8, 8])], inits[:6],
                             extra_opsets=[("com.example", 1)])
    # Dropout (inference and training with ratio 0), Identity, Cast, Where.
    dr_inits = [numpy_helper.from_array(np.array(0.0, dtype=np.float32), "ratio"),
                numpy_helper.from_array(np.array(True), "training")]
    dr_nodes = [helper.make_node("Dropout", ["x", "ratio", "training"], ["d"], name="dropout"),
                helper.make_node("Identity", ["d"], ["i"], name="id"),
                helper.make_node("Cast", ["i"], ["c"], name="cast", to=TensorProto.DOUBLE),
                helper.make_node("Cast", ["c"], ["y"], name="cast2", to=TensorProto.FLOAT)]
    out["dropout"] = model(dr_nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
                           [helper.make_tensor_value_info("y", F, [2, 3])], dr_inits)
    # A chain of Relus (long search steps).
    ch_nodes = [helper.make_node("Relu", ["x" if k == 0 else f"r{k - 1}"], [f"r{k}" if k < 63 else "y"], name=f"r{k}")
                for k in range(64)]
    out["relu_chain"] = model(ch_nodes, [helper.make_tensor_value_info("x", F, [1, 16])],
                              [helper.make_tensor_value_info("y", F, [1, 16])])
    return out


def conv_bn(rng, x, out, prefix, cin=3, cout=8, dtype=np.float32):
    """Conv + BatchNormalization: a batch norm the optimiser folds into the conv."""
    inits = [numpy_helper.from_array(rnd((cout, cin, 3, 3), rng).astype(dtype), prefix + "w"),
             numpy_helper.from_array(np.abs(rnd((cout,), rng)) + 0.5, prefix + "s"),
             numpy_helper.from_array(rnd((cout,), rng), prefix + "t"), numpy_helper.from_array(rnd((cout,), rng), prefix + "m"),
             numpy_helper.from_array(np.abs(rnd((cout,), rng)) + 0.5, prefix + "v")]
    w = prefix + "w"
    nodes = []
    if dtype != np.float32:
        nodes.append(helper.make_node("Cast", [w], [w + "_f"], name=prefix + "cast", to=F))
        w = w + "_f"
    nodes += [helper.make_node("Conv", [x, w], [prefix + "c"], name=prefix + "conv", pads=[1, 1, 1, 1]),
              helper.make_node("BatchNormalization", [prefix + "c", prefix + "s", prefix + "t", prefix + "m", prefix + "v"],
                               [out], name=prefix + "bn")]
    return nodes, inits


def edge_models(rng):
    """Valid models with parts the executor cannot run (or unusual weights),
    each with a batch norm to fold elsewhere: the optimiser must optimise
    around those parts."""
    out = {}
    x = helper.make_tensor_value_info("x", F, ["N", 3, 8, 8])
    # A custom-domain op.
    nodes, inits = conv_bn(rng, "x", "b", "a_")
    nodes += [helper.make_node("FancyOp", ["b"], ["f"], name="fancy", domain="com.example"),
              helper.make_node("Relu", ["f"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "custom", [x], [helper.make_tensor_value_info("y", F, ["N", 8, 8, 8])], inits,
                          value_info=[helper.make_tensor_value_info("f", F, ["N", 8, 8, 8])])
    out["custom_op"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    # An If whose branches read the batch norm's output from the outer graph.
    nodes, inits = conv_bn(rng, "x", "b", "a_")
    then_g = helper.make_graph([helper.make_node("Relu", ["b"], ["t_out"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t_out", F, ["N", 8, 8, 8])])
    else_g = helper.make_graph([helper.make_node("Neg", ["b"], ["e_out"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e_out", F, ["N", 8, 8, 8])])
    inits.append(numpy_helper.from_array(np.array(True), "cond"))
    nodes += [helper.make_node("If", ["cond"], ["i"], name="if", then_branch=then_g, else_branch=else_g),
              helper.make_node("Relu", ["i"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "if", [x], [helper.make_tensor_value_info("y", F, ["N", 8, 8, 8])], inits)
    out["if"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    # An LSTM over pooled conv features.
    nodes, inits = conv_bn(rng, "x", "b", "a_")
    inits += [numpy_helper.from_array(np.array([1, -1, 8], dtype=np.int64), "seq_shape"),
              numpy_helper.from_array(rnd((1, 16, 8), rng), "W"), numpy_helper.from_array(rnd((1, 16, 4), rng), "R")]
    nodes += [helper.make_node("GlobalAveragePool", ["b"], ["p"], name="gap"),
              helper.make_node("Reshape", ["p", "seq_shape"], ["seq"], name="to_seq"),
              helper.make_node("LSTM", ["seq", "W", "R"], ["h"], name="lstm", hidden_size=4),
              helper.make_node("Relu", ["h"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", F, [1, 1, 1, 4])], inits)
    out["lstm"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    # fp16 weights, cast to float for the convolution.
    nodes, inits = conv_bn(rng, "x", "b", "a_", dtype=np.float16)
    nodes += [helper.make_node("Relu", ["b"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "fp16", [x], [helper.make_tensor_value_info("y", F, ["N", 8, 8, 8])], inits)
    out["fp16_weights"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    # An fp16 part (computed in float16: in float32 and rounded by the executor).
    nodes, inits = conv_bn(rng, "x", "b", "a_")
    nodes += [helper.make_node("Cast", ["b"], ["h"], name="to_half", to=TensorProto.FLOAT16),
              helper.make_node("Relu", ["h"], ["hr"], name="relu_half"),
              helper.make_node("Cast", ["hr"], ["y"], name="to_float", to=F)]
    g = helper.make_graph(nodes, "fp16", [x], [helper.make_tensor_value_info("y", F, ["N", 8, 8, 8])], inits)
    out["fp16_graph"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    # Model-local functions (torch.onnx's export_modules_as_functions): a gate
    # function with an attribute it passes on, called twice (once without
    # the attribute), after the batch norm; inlined at import.
    nodes, inits = conv_bn(rng, "x", "b", "a_")
    leaky = helper.make_node("LeakyRelu", ["X"], ["l"], name="leaky")
    alpha = leaky.attribute.add()  # alpha = the call's attribute "a"
    alpha.name, alpha.ref_attr_name, alpha.type = "alpha", "a", onnx.AttributeProto.FLOAT
    gate = helper.make_function("lib", "Gate", ["X"], ["Y"],
                                [leaky, helper.make_node("Sigmoid", ["l"], ["s"], name="sigmoid"),
                                 helper.make_node("Mul", ["X", "s"], ["Y"], name="mul")],
                                [helper.make_opsetid("", 15)], ["a"])
    nodes += [helper.make_node("Gate", ["b"], ["g"], name="gate1", domain="lib", a=0.2),
              helper.make_node("Gate", ["g"], ["y"], name="gate2", domain="lib")]
    g = helper.make_graph(nodes, "function", [x], [helper.make_tensor_value_info("y", F, ["N", 8, 8, 8])], inits)
    out["local_function"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15),
                                                                helper.make_opsetid("lib", 1)], functions=[gate])
    for m in out.values():
        m.ir_version = 8
        m.producer_name = "corpus"
    return out


# ---- structural mutations: each returns a mutated copy, or None if it does not apply
def nodes_with(m, op):
    return [n for n in m.graph.node if n.op_type == op]


def set_attr(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.extend([helper.make_attribute(name, value)])


def m_attr(ops, name, values):
    def f(m, rng):
        cands = [n for n in m.graph.node if n.op_type in ops]
        if not cands:
            return None
        set_attr(rng.choice(cands), name, rng.choice(values))
        return m
    return f


def m_attr_type(m, rng):
    cands = [n for n in m.graph.node if n.attribute]
    if not cands:
        return None
    n = rng.choice(cands)
    a = rng.choice(list(n.attribute))
    name = a.name
    n.attribute.remove(a)
    n.attribute.extend([helper.make_attribute(name, rng.choice(["oops", 3.5, [1.0, 2.0], 7, ["a", "b"]]))])
    return m


def m_drop_attr(m, rng):
    cands = [n for n in m.graph.node if n.attribute]
    if not cands:
        return None
    n = rng.choice(cands)
    n.attribute.remove(rng.choice(list(n.attribute)))
    return m


def m_inputs(m, rng):
    n = rng.choice(list(m.graph.node))
    k = rng.randrange(4)
    if k == 0 and n.input:
        del n.input[-1]
    elif k == 1:
        n.input.append(rng.choice(["x", "undefined_tensor", ""]))
    elif k == 2 and n.input:
        n.input[rng.randrange(len(n.input))] = "undefined_tensor"
    else:
        n.input[:] = list(n.input) * 2
    return m


def m_outputs(m, rng):
    n = rng.choice(list(m.graph.node))
    k = rng.randrange(3)
    if k == 0:
        n.output.append("extra_out")
    elif k == 1 and len(n.output) > 0:
        n.output[0] = m.graph.node[0].output[0] if n is not m.graph.node[0] else "x"
    else:
        del n.output[:]
    return m


def m_cycle(m, rng):
    if len(m.graph.node) < 2:
        return None
    i = rng.randrange(len(m.graph.node) - 1)
    j = rng.randrange(i + 1, len(m.graph.node))
    a, b = m.graph.node[i], m.graph.node[j]
    if not a.input or not b.output:
        return None
    a.input[0] = b.output[0]
    return m


def m_order(m, rng):
    nodes = list(m.graph.node)
    rng.shuffle(nodes) if rng.random() < 0.5 else nodes.reverse()
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def m_init_dims(m, rng):
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    k = rng.randrange(5)
    if k == 0:
        del t.dims[:]
        t.dims.extend([2 ** 32, 2 ** 32])
    elif k == 1:
        del t.dims[:]
        t.dims.extend([2 ** 62, 4])
    elif k == 2 and t.dims:
        t.dims[0] = -t.dims[0] - 1
    elif k == 3:
        t.dims.append(3)
    else:
        t.raw_data = t.raw_data[: len(t.raw_data) // 2]
    return m


def m_init_type(m, rng):
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    t.data_type = rng.choice([0, 2, 3, 8, 10, 11, 16, 99, -1])
    return m


def m_input_dims(m, rng):
    vi = rng.choice(list(m.graph.input))
    dims = vi.type.tensor_type.shape.dim
    k = rng.randrange(6)
    if k == 0 and dims:
        dims[0].dim_value = 0
    elif k == 1 and dims:
        dims[rng.randrange(len(dims))].dim_value = 2 ** 40
    elif k == 2 and dims:
        dims[rng.randrange(len(dims))].dim_value = -5
    elif k == 3:
        dims.add().dim_value = 2
    elif k == 4 and dims:
        del dims[-1]
    else:
        vi.type.tensor_type.ClearField("shape")
    return m


def m_elem_type(m, rng):
    vi = rng.choice(list(m.graph.input) + list(m.graph.output))
    vi.type.tensor_type.elem_type = rng.choice([0, 2, 6, 7, 8, 9, 10, 11, 16, 99])
    return m


def m_expand_huge(m, rng):
    t = numpy_helper.from_array(np.array(rng.choice([[10 ** 6, 10 ** 6], [2 ** 31, 2 ** 31, 4], [-3, 4], [0, 7], [40000, 40000]]),
                                         dtype=np.int64), "huge_shape")
    m.graph.initializer.append(t)
    op = rng.choice(["Expand", "ConstantOfShape", "Reshape"])
    last = m.graph.output[0].name
    m.graph.node[-1].output[0] = "pre_huge"
    if op == "ConstantOfShape":
        m.graph.node.append(helper.make_node("ConstantOfShape", ["huge_shape"], ["huge"], name="huge"))
        m.graph.node.append(helper.make_node("Add", ["pre_huge", "huge"], [last], name="huge_add"))
    else:
        m.graph.node.append(helper.make_node(op, ["pre_huge", "huge_shape"], [last], name="huge"))
    return m


def m_range_huge(m, rng):
    m.graph.initializer.extend([numpy_helper.from_array(np.array(v, dtype=np.int64), n) for n, v in
                                (("r0", 0), ("r1", rng.choice([10 ** 13, -10 ** 13, 5])), ("rd", rng.choice([1, 0, -1])))])
    last = m.graph.output[0].name
    m.graph.node[-1].output[0] = "pre_range"
    m.graph.node.append(helper.make_node("Range", ["r0", "r1", "rd"], ["rg"], name="range"))
    m.graph.node.append(helper.make_node("Cast", ["rg"], ["rgf"], name="rcast", to=F))
    m.graph.node.append(helper.make_node("ReduceMax", ["rgf"], ["rmax"], name="rmax", keepdims=0))
    m.graph.node.append(helper.make_node("Add", ["pre_range", "rmax"], [last], name="radd"))
    return m


def m_opset(m, rng):
    m.opset_import[0].version = rng.choice([1, 7, 10, 11, 12, 18, 100, -1])
    return m


def m_ir(m, rng):
    m.ir_version = rng.choice([0, 1, 3, 4, 9, 100, -2])
    return m


def m_no_outputs(m, rng):
    k = rng.randrange(3)
    if k == 0:
        del m.graph.output[:]
    elif k == 1:
        m.graph.output[0].name = "not_produced"
    else:
        m.graph.output.extend([copy.deepcopy(m.graph.output[0])])
    return m


def m_op_type(m, rng):
    n = rng.choice(list(m.graph.node))
    n.op_type = rng.choice(["", "NoSuchOp", "Conv", "Relu", "If", "LSTM", "MatMul", "Softmax"])
    return m


def m_names(m, rng):
    k = rng.randrange(3)
    if k == 0:
        for n in m.graph.node:
            n.name = "same"
    elif k == 1 and m.graph.initializer:
        m.graph.initializer[0].name = ""
    else:
        m.graph.node[0].output[0] = ""
    return m


def m_default_input(m, rng):
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    m.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return m


def m_external(m, rng):
    """An initializer stored in an external data file that cannot be read:
    missing, outside the model's directory, absolute, nameless, a bad
    offset or a length past the end (the corpus has no data files)."""
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    n = len(t.raw_data) or 16
    t.ClearField("raw_data")
    for f in ("float_data", "int64_data", "int32_data", "double_data"):
        t.ClearField(f)
    t.data_location = onnx.TensorProto.EXTERNAL
    kv = rng.choice([{"location": "missing.bin"}, {"location": "../weights.bin"}, {"location": "/etc/hostname"},
                     {"offset": "0", "length": str(n)}, {"location": "missing.bin", "offset": "-4"},
                     {"location": "missing.bin", "length": "x"}, {"location": "sub/../../w.bin"}])
    for k, v in kv.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return m


def m_extra_outputs(m, rng):
    """A node with more outputs than its schema allows (ONNX Runtime refuses it)."""
    n = rng.choice(list(m.graph.node))
    n.output.extend([f"extra_{k}" for k in range(rng.choice([1, 3]))])
    return m


def m_int_shape(m, rng):
    """A Reshape whose shape input is int32 (the schema says int64)."""
    t = numpy_helper.from_array(np.array([1, -1], dtype=np.int32), "shape32")
    m.graph.initializer.append(t)
    last = m.graph.output[0].name
    m.graph.node[-1].output[0] = "pre_shape32"
    m.graph.node.append(helper.make_node("Reshape", ["pre_shape32", "shape32"], [last], name="reshape32"))
    return m


def m_shadow(m, rng):
    """An initializer that shadows a graph input with another shape or type."""
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    dims = list(t.dims) + [2] if rng.random() < 0.5 else list(t.dims)
    elem = t.data_type if dims != list(t.dims) else (7 if t.data_type != 7 else 1)
    m.graph.input.append(helper.make_tensor_value_info(t.name, elem, dims))
    return m


MUTATIONS = [
    m_attr(["Conv", "MaxPool", "AveragePool"], "strides", [[0, 0], [0, 1], [-1, 1], [1], [2 ** 40, 1], [1, 1, 1]]),
    m_attr(["Conv", "MaxPool"], "dilations", [[0, 0], [-2, 1], [1], [2 ** 31, 1]]),
    m_attr(["Conv", "MaxPool", "AveragePool"], "pads", [[-1, 0, 0, 0], [2 ** 40, 0, 0, 0], [1, 1], [100, 100, 100, 100]]),
    m_attr(["Conv", "MaxPool", "AveragePool"], "kernel_shape", [[0, 0], [-3, 3], [3], [1000, 1000], [2, 2, 2]]),
    m_attr(["Conv", "MaxPool", "AveragePool"], "auto_pad", ["SAME_UPPER", "VALID", "BOGUS", ""]),
    m_attr(["Conv"], "group", [0, -1, 3, 2 ** 40, 8]),
    m_attr(["MaxPool"], "ceil_mode", [1, 7, -1]),
    m_attr(["Flatten", "Softmax", "Concat", "Gather", "Split"], "axis", [5, -7, 2 ** 40, 100]),
    m_attr(["Transpose"], "perm", [[0, 0, 1], [0, 1], [3, 1, 0], [0, 1, 2, 3], [-1, 0, 1]]),
    m_attr(["Gemm"], "transB", [2, -1]),
    m_attr(["Gemm"], "alpha", [float("nan"), float("inf"), 0.0]),
    m_attr(["Cast"], "to", [0, 8, 99, -1, 16]),
    m_attr(["BatchNormalization"], "epsilon", [-1.0, float("nan"), 0.0]),
    m_attr(["BatchNormalization"], "training_mode", [1]),
    m_attr(["Reshape"], "allowzero", [1, 5]),
    m_attr(["Concat", "Split"], "axis", [0, 2, -1]),
    m_attr_type, m_drop_attr, m_inputs, m_outputs, m_cycle, m_order, m_init_dims, m_init_type, m_input_dims,
    m_elem_type, m_expand_huge, m_range_huge, m_opset, m_ir, m_no_outputs, m_op_type, m_names, m_default_input,
    m_external, m_extra_outputs, m_int_shape, m_shadow,
]


def byte_mutation(data, rng):
    b = bytearray(data)
    k = rng.randrange(4)
    if k == 0:
        return bytes(b[: rng.randrange(1, len(b))])
    if k == 1:
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if k == 2:
        i = rng.randrange(len(b))
        n = rng.randint(1, 16)
        b[i:i + n] = bytes(rng.randrange(256) for _ in range(n))
        return bytes(b)
    i = rng.randrange(len(b))
    return bytes(b[:i] + b[i:i + rng.randint(1, 64)] * 2 + b[i:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=520)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", default="")
    p.add_argument("--edge_dir", default="", help="also write the edge models (edge_<name>.onnx) here")
    a = p.parse_args()
    if a.edge_dir:
        for name, m in edge_models(np.random.default_rng(a.seed)).items():
            onnx.checker.check_model(m)
            onnx.save(m, os.path.join(a.edge_dir, f"edge_{name}.onnx"))
    rng = random.Random(a.seed)
    base = seeds(np.random.default_rng(a.seed))
    entries = []
    for name, m in base.items():
        onnx.checker.check_model(m)
        entries.append((f"seed_{name}", m.SerializeToString()))
    for name, m in edge_models(np.random.default_rng(a.seed)).items():
        base["edge_" + name] = m
        entries.append((f"seed_edge_{name}", m.SerializeToString()))
    names = sorted(base)
    k = 0
    while len(entries) < a.count:
        src = names[k % len(names)]
        k += 1
        if rng.random() < 0.3:
            data = byte_mutation(base[src].SerializeToString(), rng)
            entries.append((f"{len(entries):03d}_{src}_bytes", data))
            continue
        mut = rng.choice(MUTATIONS)
        m = copy.deepcopy(base[src])
        m = mut(m, rng)
        if m is None:
            continue
        # Sometimes two edits at once.
        if rng.random() < 0.2:
            m2 = rng.choice(MUTATIONS)(m, rng)
            m = m2 if m2 is not None else m
        label = getattr(mut, "__name__", "attr")
        entries.append((f"{len(entries):03d}_{src}_{label}", m.SerializeToString()))
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        for name, data in entries:
            f.write(f"{name} {len(data)}\n".encode())
            f.write(data)
    os.replace(tmp, a.out)
    if a.dir:
        os.makedirs(a.dir, exist_ok=True)
        for name, data in entries:
            with open(os.path.join(a.dir, name + ".onnx"), "wb") as f:
                f.write(data)
    print(f"wrote {len(entries)} models to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
