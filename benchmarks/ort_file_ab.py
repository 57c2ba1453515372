#!/usr/bin/python3
"""Two ONNX files in ONNX Runtime, the way a user compares them.

Times A and B on the same seeded inputs, interleaved (A B B A ...), 1
intra-op thread, optimisation level all, in several sessions, the files'
order swapped every other session (two sessions of one model differ by 1-2%
here: a single session pair is not enough), and prints the speedup of B
(A's time / B's, median of the per-pair ratios, pooled over the sessions)
with a 95% bootstrap interval, and each session's median.

  /usr/bin/python3 benchmarks/ort_file_ab.py A.onnx B.onnx NAME:D0,D1,...[;NAME2:...] [SESSIONS] [PAIRS]

NAME:dims gives an input's shape: float32, N(0, 1) (NAME:dims:float16: the
same in float16); NAME:dims:int64:V (or
int32) an integer input holding V everywhere (ids of 0, a mask of ones).
A measurement for the docs, not part of the build.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_PATH = os.path.join(ROOT, 'third_party/onnxruntime_node/node_modules')
ORT_RUN = os.path.join(ROOT, 'runtime/ort_run.js')


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    a, b, spec = sys.argv[1:4]
    sessions = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    pairs = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    with tempfile.TemporaryDirectory() as d:
        inputs = []
        for k, one in enumerate(spec.split(';')):
            name, dims, dtype, value = (one.split(':') + ['float32', '0'])[:4]
            shape = [int(x) for x in dims.split(',')]
            data = (np.random.RandomState(1 + k).randn(*shape).astype(dtype) if dtype in ('float32', 'float16') else
                    np.full(shape, int(value), dtype=dtype))
            data.tofile(os.path.join(d, 'x%d.bin' % k))
            inputs.append({'name': name, 'dtype': dtype, 'shape': shape, 'file': 'x%d.bin' % k})
        with open(os.path.join(d, 'inputs.json'), 'w') as f:
            json.dump(inputs, f)
        env = dict(os.environ, NODE_PATH=NODE_PATH)
        ratios, medians = [], []
        for s in range(sessions):
            first, second = (a, b) if s % 2 == 0 else (b, a)
            out = subprocess.run(['node', ORT_RUN, '--bench', first, second, d, str(pairs)], env=env,
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            ta, tb = (np.array(r['a']), np.array(r['b'])) if s % 2 == 0 else (np.array(r['b']), np.array(r['a']))
            ratios.extend(ta / tb)
            medians.append(float(np.median(ta / tb)))
    ratios = np.array(ratios)
    rng = np.random.default_rng(1)
    boot = [np.median(rng.choice(ratios, len(ratios))) for _ in range(2000)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    print('speedup of B: %.3fx [%.3f, %.3f] (%d sessions x %d pairs); per session: %s' %
          (np.median(ratios), lo, hi, sessions, pairs, ', '.join('%.3f' % m for m in medians)))


if __name__ == '__main__':
    main()
