// Runs an ONNX model in ONNX Runtime (onnxruntime-node, CPU) for rlflow's
// tests: the independent reference runtime.
//
//   node ort_run.js MODEL.onnx DIR [DIR ...]
//   node ort_run.js --bench A.onnx B.onnx DIR RUNS
//   node ort_run.js --serve THREADS LEVEL
//   node ort_run.js --save_optimized MODEL.onnx LEVEL OUT.onnx
//
// --bench times A and B on the same inputs, interleaved (A, B, B, A, ...)
// after a warm-up, and prints {"a_ms": median, "b_ms": median, "a": [ms per
// run], "b": [...]} (pair i = a[i], b[i]).
//
// --save_optimized writes the model as ONNX Runtime optimises it at LEVEL
// (a session's optimizedModelFilePath), as users save and deploy models.
//
// --serve is the timing server of rlflow's ONNX Runtime cost backend
// (runtime/ort_backend.cc): it prints {"ready":true,"version":V} and then
// answers one JSON request per stdin line with one JSON line on stdout
// (sessions with THREADS intra-op threads (0: ORT's default) and graph
// optimisation LEVEL: basic, extended or all):
//   {"op":"time","model":M,"inputs":DIR,"warmup":W,"samples":S,"min_ms":T[,"max_ms":X]}
//     -> {"ms": median ms per run, "samples": [ms per run, in the order
//        taken]} (a first run slower than X / S: no second warm-up, and
//        at least 3 samples of about X ms in all; SamplesWithin in
//        runtime/cost_model.h)
//   {"op":"paired","a":A,"b":B,"inputs":DIR,"pairs":N,"warmup":W,"min_ms":T,"blocks":K}
//     -> {"wall_a":[..],"wall_b":[..],"cpu_a":[..],"cpu_b":[..],"blocks":[..]}
//        (ms per run; CPU = the process's user + system time; the pairs
//        timed in up to K pairs of sessions, A's created first in every
//        other one; "blocks": how many pairs each timed)
//   {"op":"profile","model":M,"inputs":DIR,"runs":N,"warmup":W,"prefix":P[,"optimized":PATH]}
//     -> {"run_ms":[..],"kernels":[[{"name","op","ms"}, ..] per run]}
//        from ORT's profiler (kernel events of each timed run)
// A failed request answers {"error": message}; the server goes on.
//
// DIR/inputs.json lists [{name, dtype, shape, file}] with raw little-endian
// data in DIR/<file>; the outputs are written the same way to
// DIR/outputs.json (in the session's output order). Several DIRs: one
// session runs each in turn. Exit code 1 and a
// one-line message on failure.
'use strict';
const fs = require('fs');
const path = require('path');

const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array,  // the bits (Node has no Float16Array; onnxruntime-common takes these)
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

function median(v) {
  const s = v.slice().sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function serve(threads, level) {
  const ort = require('onnxruntime-node');
  const version = require('onnxruntime-node/package.json').version;
  const base = {interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: level, logSeverityLevel: 3};
  if (threads > 0) base.intraOpNumThreads = threads;
  const feedsOf = (dir) => {
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
    const feeds = {};
    for (const t of manifest) feeds[t.name] = new ort.Tensor(t.dtype, load(dir, t), t.shape);
    return feeds;
  };
  // One run (repeated `reps` times): [wall ms, CPU ms] per run.
  const timeRun = async (s, feeds, reps) => {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let r = 0; r < reps; ++r) await s.run(feeds);
    const wall = Number(process.hrtime.bigint() - t0) / 1e6 / reps;
    const c = process.cpuUsage(c0);
    return [wall, (c.user + c.system) / 1e3 / reps];
  };
  const repsFor = (ms, minMs) => (ms > 0 && ms < minMs ? Math.min(1000, Math.floor(minMs / ms) + 1) : 1);
  const samplesWithin = (q, first) => {
    const samples = Math.max(1, q.samples);
    if (!(q.max_ms > 0) || !(first * samples > q.max_ms)) return samples;
    return Math.min(samples, Math.max(3, Math.ceil(q.max_ms / first)));
  };
  const handlers = {
    async time(q) {
      const s = await ort.InferenceSession.create(q.model, base);
      const feeds = feedsOf(q.inputs);
      let first = (await timeRun(s, feeds, 1))[0];
      const n = samplesWithin(q, first);
      for (let k = 1; k < Math.max(1, q.warmup) && n === Math.max(1, q.samples); ++k)
        first = (await timeRun(s, feeds, 1))[0];
      const reps = repsFor(first, q.min_ms);
      const v = [];
      for (let k = 0; k < n; ++k) v.push((await timeRun(s, feeds, reps))[0]);
      await s.release();
      return {ms: median(v), samples: v};
    },
    async paired(q) {
      // Two sessions of one model sit in memory differently, and where the
      // weights do not fit in the caches that moves a run by several
      // percent (a 495 MB decoder against a copy of itself, one pair of
      // sessions each: 0.935x to 1.090x, each with a narrow interval). So
      // the pairs are timed in `blocks` pairs of sessions (at least 5 pairs
      // each), A's session created first in every other one, and the
      // caller's interval covers the spread between them.
      const feeds = feedsOf(q.inputs);
      const pairs = Math.max(1, q.pairs);
      const blocks = Math.max(1, Math.min(q.blocks || 1, Math.floor(pairs / 5)));
      const out = {wall_a: [], wall_b: [], cpu_a: [], cpu_b: [], blocks: []};
      let reps = 0;
      for (let block = 0; block < blocks; ++block) {
        const n = Math.floor(pairs / blocks) + (block < pairs % blocks ? 1 : 0);
        let sa, sb;
        if (block % 2 === 0) {
          sa = await ort.InferenceSession.create(q.a, base);
          sb = await ort.InferenceSession.create(q.b, base);
        } else {
          sb = await ort.InferenceSession.create(q.b, base);
          sa = await ort.InferenceSession.create(q.a, base);
        }
        const first = [];
        for (let k = 0; k < Math.max(1, q.warmup); ++k) {
          first.push((await timeRun(sa, feeds, 1))[0]);
          first.push((await timeRun(sb, feeds, 1))[0]);
        }
        if (block === 0) reps = repsFor(Math.min(...first), q.min_ms);
        const one = async (s, w, c) => { const [x, y] = await timeRun(s, feeds, reps); out[w].push(x); out[c].push(y); };
        // A first in every other pair, and in a block of an odd number of
        // pairs the order of its extra pair alternates from block to block,
        // so that each runs first as often as the other: with 5 pairs a
        // block (3 A-first), a model against a copy of itself measured
        // 0.992x-0.998x in 20 of 20 measurements of 12 blocks, 1.001x with
        // 10 a block.
        for (let k = 0; k < n; ++k) {
          if ((k + (n % 2) * block) % 2 === 0) { await one(sa, 'wall_a', 'cpu_a'); await one(sb, 'wall_b', 'cpu_b'); }
          else { await one(sb, 'wall_b', 'cpu_b'); await one(sa, 'wall_a', 'cpu_a'); }
        }
        out.blocks.push(n);
        await sa.release();
        await sb.release();
      }
      return out;
    },
    async profile(q) {
      const opts = Object.assign({}, base, {enableProfiling: true, profileFilePrefix: q.prefix});
      if (q.optimized) {
        // ORT's optimised graph, weights apart: the names of the nodes it
        // made by fusing (the profile names kernels by node) and their outputs.
        opts.optimizedModelFilePath = q.optimized;
        opts.extra = {session: {optimized_model_external_initializers_file_name: path.basename(q.optimized) + '.weights',
                                optimized_model_external_initializers_min_size_in_bytes: '64'}};
      }
      const s = await ort.InferenceSession.create(q.model, opts);
      const feeds = feedsOf(q.inputs);
      const warmup = Math.max(1, q.warmup);
      for (let k = 0; k < warmup + Math.max(1, q.runs); ++k) await s.run(feeds);
      s.endProfiling();
      await s.release();
      const dir = path.dirname(q.prefix), stem = path.basename(q.prefix);
      const files = fs.readdirSync(dir).filter((f) => f.startsWith(stem) && f.endsWith('.json'));
      if (files.length !== 1) throw new Error(`expected one profile file ${q.prefix}*.json, found ${files.length}`);
      const file = path.join(dir, files[0]);
      const events = JSON.parse(fs.readFileSync(file, 'utf8'));
      fs.unlinkSync(file);
      const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((x, y) => x.ts - y.ts).slice(warmup);
      const kernels = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));
      return {
        run_ms: runs.map((r) => r.dur / 1e3),
        kernels: runs.map((r) => kernels.filter((e) => e.ts >= r.ts && e.ts + e.dur <= r.ts + r.dur).map((e) => ({
          name: e.name.slice(0, -'_kernel_time'.length), op: (e.args && e.args.op_name) || '', ms: e.dur / 1e3}))),
      };
    },
  };
  process.stdout.write(JSON.stringify({ready: true, version}) + '\n');
  const rl = require('readline').createInterface({input: process.stdin});
  for await (const line of rl) {
    if (!line.trim()) continue;
    let reply;
    try {
      const q = JSON.parse(line);
      if (q.op === 'quit') break;
      const h = handlers[q.op];
      if (!h) throw new Error(`unknown request '${q.op}'`);
      reply = await h(q);
    } catch (e) {
      reply = {error: String(e && e.message ? e.message : e).split('\n')[0]};
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}

async function main() {
  if (process.argv[2] === '--serve') {
    const threads = parseInt(process.argv[3] || '1', 10);
    const level = process.argv[4] || 'all';
    if (!['disabled', 'basic', 'extended', 'all'].includes(level)) throw new Error(`unknown optimisation level '${level}'`);
    return serve(threads, level);
  }
  if (process.argv[2] === '--save_optimized') {
    const [model, level, out] = process.argv.slice(3);
    if (!model || !['basic', 'extended', 'all'].includes(level) || !out)
      throw new Error('usage: node ort_run.js --save_optimized MODEL.onnx basic|extended|all OUT.onnx');
    const ort = require('onnxruntime-node');
    const s = await ort.InferenceSession.create(model, {graphOptimizationLevel: level, optimizedModelFilePath: out,
                                                        intraOpNumThreads: 1, interOpNumThreads: 1});
    await s.release();
    return;
  }
  if (process.argv[2] === '--bench') {
    const [a, b, dir, runs] = process.argv.slice(3);
    if (!a || !b || !dir) throw new Error('usage: node ort_run.js --bench A.onnx B.onnx DIR RUNS');
    return bench(a, b, dir, Math.max(1, parseInt(runs || '10', 10)));
  }
  const [model, ...dirs] = process.argv.slice(2);
  if (!model || dirs.length === 0) throw new Error('usage: node ort_run.js MODEL.onnx DIR [DIR ...]');
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  for (const dir of dirs) {
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
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
}

main().catch((e) => {
  process.stderr.write(`ort_run: ${String(e && e.message ? e.message : e).split('\n')[0]}\n`);
  process.exit(1);
});
