// node-redlock peer for scripts/bench: C async workers cycle acquire + release over R resources.
//   node redlock-bench.mjs --nodes 127.0.0.1:7101,... [-c 50] [-r 10000] [-d 10] [--warmup 2]
//                          [--ttl 10000] [--retry 0|default] [--autopipeline on|off]
//                          [--mode redlock|plain] [--multi K]
// --mode plain is the floor of a Redlock cycle on the masters: SET key value NX PX ttl on every
// master, a majority wins, then a compare-and-delete script (EVALSHA) on every master; no
// retries, no extension, nothing else (the same autopipelined ioredis connections).
// --multi K: each cycle locks K distinct resources drawn among R at once,
// redlock.acquire([r1, ..., rK], ttl) (one script sets all K keys or none on each master), and
// releases them together: the workload of redlock-bench --kind multi:K.
// Prints one JSON line. Cycles count when their release completes inside the window; acquire
// latencies count for acquisitions that start inside it (the method of perf-anchors.md). The
// masters' CPU over the window (INFO cpu: used_cpu_sys + used_cpu_user) is reported per cycle.
import { randomBytes } from "node:crypto";
import Redis from "ioredis";
import Redlock from "redlock";

const args = {
  nodes: "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005",
  c: 50, r: 10000, d: 10, warmup: 2, ttl: 10000, retry: "0", autopipeline: "on", prefix: "nr:",
  mode: "redlock", multi: 1,
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const key = argv[i].replace(/^-+/, "");
  if (!(key in args) || i + 1 >= argv.length) {
    console.error(`unknown or incomplete option ${argv[i]}`);
    process.exit(64);
  }
  args[key] = typeof args[key] === "number" ? Number(argv[i + 1]) : argv[i + 1];
}

const clients = args.nodes.split(",").map((address) => {
  const [host, port] = address.split(":");
  return new Redis({ host, port: Number(port), enableAutoPipelining: args.autopipeline === "on",
                     lazyConnect: false, maxRetriesPerRequest: 1 });
});
await Promise.all(clients.map((c) => c.ping()));

if (args.mode !== "redlock" && args.mode !== "plain") {
  console.error(`--mode wants redlock or plain, got ${args.mode}`);
  process.exit(64);
}
if (!Number.isInteger(args.multi) || args.multi < 1 || args.multi > args.r ||
    (args.mode === "plain" && args.multi !== 1)) {
  console.error(`--multi wants 1 <= K <= -r (and 1 with --mode plain), got ${args.multi}`);
  process.exit(64);
}
const settings = args.retry === "default" ? {} : { retryCount: Number(args.retry) };
const redlock = new Redlock(clients, settings);
redlock.on("error", () => {}); // per-node "no" votes are expected under contention

// The plain Redlock cycle (--mode plain).
const quorum = Math.floor(clients.length / 2) + 1;
for (const c of clients) {
  c.defineCommand("compareAndDelete", {
    numberOfKeys: 1,
    lua: 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0',
  });
}
const releasePlain = (key, value) =>
  Promise.all(clients.map((c) => c.compareAndDelete(key, value).catch(() => 0)));
const plain = {
  async acquire(key, ttl) {
    const value = randomBytes(20).toString("hex");
    const votes = await Promise.all(clients.map((c) =>
      c.set(key, value, "PX", ttl, "NX").then((r) => r === "OK", () => false)));
    if (votes.filter(Boolean).length >= quorum) return { release: () => releasePlain(key, value) };
    await releasePlain(key, value);
    throw Object.assign(new Error("no quorum"), { name: "ExecutionError" });
  },
};
const acquire = args.mode === "plain"
  ? (resources, ttl) => plain.acquire(resources[0], ttl)
  : (resources, ttl) => redlock.acquire(resources, ttl);
const draw = () => args.prefix + Math.floor(Math.random() * args.r);
// K distinct resources, in the order drawn.
const drawSet = () => {
  const set = new Set();
  while (set.size < args.multi) set.add(draw());
  return [...set];
};

// Summed used_cpu_sys + used_cpu_user of the masters, in µs.
async function mastersCpuUs() {
  const infos = await Promise.all(clients.map((c) => c.info("cpu")));
  let total = 0;
  for (const info of infos)
    for (const field of ["used_cpu_sys", "used_cpu_user"])
      total += Number(info.match(new RegExp(`${field}:([0-9.]+)`))[1]) * 1e6;
  return total;
}

const latencies = []; // acquire latencies in µs, window only
let cycles = 0, failed = 0, release_failed = 0, errors = 0;
let measuring = false, running = true;

async function worker() {
  while (running) {
    const resources = args.multi === 1 ? [draw()] : drawSet();
    const started = process.hrtime.bigint();
    const counted = measuring;
    let lock;
    try {
      lock = await acquire(resources, args.ttl);
    } catch (e) {
      if (measuring) {
        if (e && e.name === "ExecutionError") ++failed; else ++errors;
      }
      continue;
    }
    if (counted && measuring) latencies.push(Number(process.hrtime.bigint() - started) / 1000);
    try {
      await lock.release();
      if (measuring) ++cycles;
    } catch {
      if (measuring) ++release_failed;
    }
  }
}

const workers = Array.from({ length: args.c }, () => worker());
await new Promise((resolve) => setTimeout(resolve, args.warmup * 1000));
const m0 = await mastersCpuUs();
const u0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
measuring = true;
await new Promise((resolve) => setTimeout(resolve, args.d * 1000));
measuring = false;
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
const u1 = process.cpuUsage(u0);
const masters_us = (await mastersCpuUs()) - m0;
running = false;
await Promise.all(workers);
await Promise.all(clients.map((c) => c.quit()));

latencies.sort((a, b) => a - b);
const pct = (p) => latencies.length ? latencies[Math.min(latencies.length - 1,
                                                          Math.floor(p * latencies.length))] : 0;
console.log(JSON.stringify({
  tool: args.mode === "plain" ? "plain-redlock" : "node-redlock", redlock: "5.0.0-beta.2",
  autopipeline: args.autopipeline === "on",
  retry: args.retry, c: args.c, r: args.r, multi: args.multi, ttl: args.ttl, seconds,
  cycles, cycles_per_s: cycles / seconds, failed_acquires: failed, failed_releases: release_failed,
  errors, acquire_p50_us: pct(0.5), acquire_p99_us: pct(0.99), acquire_p999_us: pct(0.999),
  client_cpu_us_per_cycle: cycles ? (u1.user + u1.system) / cycles : 0,
  masters_cpu_us_per_cycle: cycles ? masters_us / cycles : 0,
}));
process.exit(0);
