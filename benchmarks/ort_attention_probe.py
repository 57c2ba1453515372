#!/usr/bin/python3
"""Would ONNX Runtime's contrib attention operators make a torch export faster?

Rewrites every torch.nn.MultiheadAttention block of a torch.onnx export (the
packed in-projection, the slices, reshapes and transposes, the scaled
scores, softmax and the out-projection) by hand into
  com.microsoft.Attention(x, W_qkv, b_qkv) -> MatMul(W_out^T) -> Add(b_out)
and into
  three MatMuls -> com.microsoft.MultiHeadAttention(q, k, v, b_qkv) -> ...
checks both against the original in ONNX Runtime, then times each against
the original, interleaved (A B B A ...), 1 intra-op thread, optimisation
level all, and prints the speedup (original / variant, median of the per-pair
ratios) with a 95% bootstrap interval.

  /usr/bin/python3 benchmarks/ort_attention_probe.py MODEL.onnx [PAIRS]

A measurement for issue #22 (README, "Attention"), not part of the build.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_PATH = os.path.join(ROOT, 'third_party/onnxruntime_node/node_modules')
ORT_RUN = os.path.join(ROOT, 'runtime/ort_run.js')


def blocks(graph):
    """Attention blocks: name prefix -> their nodes, in graph order."""
    out = {}
    for n in graph.node:
        m = re.match(r'(.*/self_att(?:n|ention)/)', n.name)
        if m:
            out.setdefault(m.group(1), []).append(n)
    return out


def rewrite(model, kind):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    graph_outputs = {o.name for o in g.output}
    replaced = {}
    for prefix, nodes in blocks(g).items():
        inside = {id(n) for n in nodes}
        first = nodes[0]
        assert first.op_type == 'Transpose', prefix
        x = first.input[0]
        outs = [o for n in nodes for o in n.output
                if o in graph_outputs or any(id(c) not in inside for c in consumers.get(o, []))]
        assert len(outs) == 1, (prefix, outs)
        proj = next(n for n in nodes if n.op_type == 'MatMul' and n.input[1] in inits)
        add = next(n for n in nodes if n.op_type == 'Add' and proj.output[0] in n.input)
        w_qkv = proj.input[1]
        b_qkv = next(i for i in add.input if i != proj.output[0])
        gemm = next(n for n in nodes if n.op_type == 'Gemm')
        assert any(a.name == 'transB' and a.i == 1 for a in gemm.attribute), prefix
        w_out, b_out = gemm.input[1], gemm.input[2]
        w_out_t = w_out + '_T'
        if w_out_t not in inits:
            t = numpy_helper.from_array(numpy_helper.to_array(inits[w_out]).T.copy(), w_out_t)
            g.initializer.append(t)
            inits[w_out_t] = t
        d = numpy_helper.to_array(inits[w_qkv]).shape[1] // 3
        heads = d // 64
        new = []
        if kind == 'attention':
            new.append(helper.make_node('Attention', [x, w_qkv, b_qkv], [prefix + 'ctx'], domain='com.microsoft',
                                        num_heads=heads, name=prefix + 'Attention'))
        else:
            w = numpy_helper.to_array(inits[w_qkv])
            for j, part in enumerate('qkv'):
                name = w_qkv + '_' + part
                if name not in inits:
                    t = numpy_helper.from_array(w[:, j * d:(j + 1) * d].copy(), name)
                    g.initializer.append(t)
                    inits[name] = t
                new.append(helper.make_node('MatMul', [x, name], [prefix + part]))
            new.append(helper.make_node('MultiHeadAttention', [prefix + 'q', prefix + 'k', prefix + 'v', b_qkv],
                                        [prefix + 'ctx'], domain='com.microsoft', num_heads=heads,
                                        name=prefix + 'MultiHeadAttention'))
        new.append(helper.make_node('MatMul', [prefix + 'ctx', w_out_t], [prefix + 'out']))
        new.append(helper.make_node('Add', [prefix + 'out', b_out], [outs[0]]))
        replaced[prefix] = new
    kept, done = [], set()
    for n in g.node:
        m = re.match(r'(.*/self_att(?:n|ention)/)', n.name)
        if m and m.group(1) in replaced:
            if m.group(1) not in done:
                kept += replaced[m.group(1)]
                done.add(m.group(1))
            continue
        kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    used = {i for n in g.node for i in n.input}
    live = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(live)
    if not any(o.domain == 'com.microsoft' for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid('com.microsoft', 1))
    return len(replaced)


def write_inputs(model, d):
    rng = np.random.default_rng(1)
    manifest = []
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [x.dim_value if x.dim_value > 0 else 1 for x in t.shape.dim]
        if t.elem_type == onnx.TensorProto.INT64:
            a, dtype = rng.integers(0, 1000, shape).astype(np.int64), 'int64'
        else:
            a, dtype = rng.standard_normal(shape).astype(np.float32), 'float32'
        a.tofile(os.path.join(d, i.name + '.bin'))
        manifest.append({'name': i.name, 'dtype': dtype, 'shape': shape, 'file': i.name + '.bin'})
    with open(os.path.join(d, 'inputs.json'), 'w') as f:
        json.dump(manifest, f)


def node(*args):
    env = dict(os.environ, NODE_PATH=NODE_PATH)
    return subprocess.run(['node', ORT_RUN] + list(args), env=env, check=True, capture_output=True, text=True).stdout


def outputs(model_path, inputs, d):
    os.makedirs(d)
    for f in os.listdir(inputs):
        with open(os.path.join(inputs, f), 'rb') as src, open(os.path.join(d, f), 'wb') as dst:
            dst.write(src.read())
    node(model_path, d)
    meta = json.load(open(os.path.join(d, 'outputs.json')))
    return [np.fromfile(os.path.join(d, o['file']), np.float32) for o in meta]


def main():
    src = sys.argv[1]
    pairs = sys.argv[2] if len(sys.argv) > 2 else '40'
    tmp = tempfile.mkdtemp(prefix='attention_probe_')
    inputs = os.path.join(tmp, 'inputs')
    os.makedirs(inputs)
    write_inputs(onnx.load(src, load_external_data=False), inputs)
    reference = outputs(src, inputs, os.path.join(tmp, 'out_original'))
    for kind in ('attention', 'multi_head_attention'):
        model = onnx.load(src)
        n = rewrite(model, kind)
        if n == 0:
            sys.exit(f'{src}: no torch.nn.MultiheadAttention block found')
        path = os.path.join(tmp, kind + '.onnx')
        onnx.save(model, path)
        got = outputs(path, inputs, os.path.join(tmp, 'out_' + kind))
        err = max(float(np.abs(a - b).max() / (np.abs(a).max() + 1e-12)) for a, b in zip(reference, got))
        d = json.loads(node('--bench', src, path, inputs, pairs))
        r = np.array(d['a']) / np.array(d['b'])
        rng = np.random.default_rng(0)
        boot = [np.median(rng.choice(r, len(r))) for _ in range(4000)]
        lo, hi = np.percentile(boot, [2.5, 97.5])
        print(f'{kind}: {n} blocks rewritten, max relative error {err:.1e}; original {d["a_ms"]:.2f} ms, '
              f'rewritten {d["b_ms"]:.2f} ms; speedup {np.median(r):.3f}x [{lo:.3f}, {hi:.3f}] ({len(r)} pairs)')


if __name__ == '__main__':
    main()
