// Runs an ONNX model in ONNX Runtime (onnxruntime-node, CPU) for rlflow's
// tests: the independent reference runtime.
//
//   node ort_run.js MODEL.onnx DIR
//   node ort_run.js --bench A.onnx B.onnx DIR RUNS
//
// --bench times A and B on the same inputs, interleaved (A, B, B, A, ...)
// after a warm-up, and prints {"a_ms": median, "b_ms": median, "a": [ms per
// run], "b": [...]} (pair i = a[i], b[i]).
//
// DIR/inputs.json lists [{name, dtype, shape, file}] with raw little-endian
// data in DIR/<file>; the outputs are written the same way to
// DIR/outputs.json (in the session's output order). Exit code 1 and a
// one-line message on failure.
'use strict';
const fs = require('fs');
const path = require('path');

const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int64: BigInt64Array,
  int32: Int32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

function load(dir, t) {
  const bytes = fs.readFileSync(path.join(dir, t.file));
  const Arr = ARRAYS[t.dtype];
  if (!Arr) throw new Error(`unsupported dtype ${t.dtype}`);
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new Arr(copy.buffer, 0, bytes.length / Arr.BYTES_PER_ELEMENT);
}

async function bench(a, b, dir, runs) {
  const ort = require('onnxruntime-node');
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
  const opts = {intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential'};
  const sa = await ort.InferenceSession.create(a, opts);
  const sb = await ort.InferenceSession.create(b, opts);
  const feeds = {};
  for (const t of manifest) feeds[t.name] = new ort.Tensor(t.dtype, load(dir, t), t.shape);
  const time = async (s) => {
    const t0 = process.hrtime.bigint();
    await s.run(feeds);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  for (let k = 0; k < 2; ++k) { await time(sa); await time(sb); }
  const ta = [], tb = [];
  for (let k = 0; k < runs; ++k) {
    if (k % 2 === 0) { ta.push(await time(sa)); tb.push(await time(sb)); }
    else { tb.push(await time(sb)); ta.push(await time(sa)); }
  }
  const median = (v) => { v.sort((x, y) => x - y); const m = v.length >> 1; return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2; };
  const pa = ta.slice(), pb = tb.slice();
  process.stdout.write(JSON.stringify({a_ms: median(ta), b_ms: median(tb), a: pa, b: pb}) + '\n');
}

async function main() {
  if (process.argv[2] === '--bench') {
    const [a, b, dir, runs] = process.argv.slice(3);
    if (!a || !b || !dir) throw new Error('usage: node ort_run.js --bench A.onnx B.onnx DIR RUNS');
    return bench(a, b, dir, Math.max(1, parseInt(runs || '10', 10)));
  }
  const [model, dir] = process.argv.slice(2);
  if (!model || !dir) throw new Error('usage: node ort_run.js MODEL.onnx DIR');
  const ort = require('onnxruntime-node');
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const feeds = {};
  for (const t of manifest) feeds[t.name] = new ort.Tensor(t.dtype, load(dir, t), t.shape);
  const results = await session.run(feeds);
  const outputs = [];
  session.outputNames.forEach((name, k) => {
    const t = results[name];
    const file = `output${k}.bin`;
    const data = t.data;
    fs.writeFileSync(path.join(dir, file), Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    outputs.push({name, dtype: t.type, shape: t.dims.map(Number), file});
  });
  fs.writeFileSync(path.join(dir, 'outputs.json'), JSON.stringify(outputs));
}

main().catch((e) => {
  process.stderr.write(`ort_run: ${String(e && e.message ? e.message : e).split('\n')[0]}\n`);
  process.exit(1);
});
