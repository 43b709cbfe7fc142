// Test data for the report's browser test (browser_test.sh).
//   node make_big.mjs --add-faults CONFIGS.json
//     appends two configs the CK emulator fails on purpose (batch size 9003: "HIP error", exit
//     1; 9004: no instance supports it), copies of the first forward config with trace times.
//   node make_big.mjs --problems N REPORT_DATA.json OUT.json
//     from a report's data (ckprof report JOB --format json), N problems: the job's tasks
//     repeated with distinct ranks, descriptions and times, laid out over the job's GPUs.
import fs from 'node:fs';

const args = process.argv.slice(2);
if (args[0] === '--add-faults') {
  const file = args[1];
  const configs = JSON.parse(fs.readFileSync(file, 'utf8'));
  const fwd = configs.find((c) => c.operation_type.endsWith('fwd'));
  let rank = Math.max(...configs.map((c) => c.metadata.priority_rank)) + 1;
  for (const n of [9003, 9004]) {
    const c = structuredClone(fwd);
    c.profiler_args.N = n;
    c.metadata.priority_rank = rank++;
    c.metadata.description = c.metadata.description.replace(/N=\d+/, `N=${n}`);
    c.metadata.gpu_time_us = 150;
    c.metadata.count = 2;
    configs.push(c);
  }
  fs.writeFileSync(file, JSON.stringify(configs, null, 1));
} else if (args[0] === '--problems') {
  const n = Number(args[1]);
  const data = JSON.parse(fs.readFileSync(args[2], 'utf8'));
  const base = data.tasks;
  const tasks = [];
  const gpus = [0, 1, 2, 3];
  const clock = new Map(gpus.map((g) => [g, data.job.started_at || 1e9]));
  let problems = 0, i = 0;
  while (problems < n) {
    const t = structuredClone(base[i % base.length]);
    const copy = Math.floor(i / base.length);
    ++i;
    // A backward record's two configs stay one problem: they share a rank and trace figures.
    const isBwdWeight = t.operation.endsWith('bwd_weight');
    const pairedBefore = isBwdWeight && tasks.length > 0 &&
        tasks[tasks.length - 1].operation.endsWith('bwd_data') &&
        tasks[tasks.length - 1].priority_rank === t.priority_rank + copy * 1000;
    if (!pairedBefore) ++problems;
    t.position = tasks.length + 1;
    t.task_id = tasks.length + 1;
    t.priority_rank += copy * 1000;
    t.description = t.description.replace(/N=(\d+)/, (_, v) => `N=${Number(v) + copy}`);
    const scale = 1 + (copy % 7) * 0.13;
    if (t.trace_gpu_time_us != null) t.trace_gpu_time_us *= scale;
    if (t.avg_ms) t.avg_ms *= scale;
    if (t.config) delete t.config;  // descriptions differ from the config now
    const gpu = gpus[tasks.length % gpus.length];
    const d = Math.max(0.05, t.elapsed_s || 0.1);
    t.gpu = gpu;
    t.started_at = clock.get(gpu);
    t.ended_at = t.started_at + d;
    clock.set(gpu, t.ended_at);
    tasks.push(t);
  }
  data.tasks = tasks;
  data.job.total = tasks.length;
  fs.writeFileSync(args[3], JSON.stringify(data));
} else {
  console.error('usage: make_big.mjs --add-faults CONFIGS | --problems N DATA OUT');
  process.exit(2);
}
