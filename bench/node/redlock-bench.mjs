// node-redlock peer for scripts/bench: C async workers cycle acquire + release over R resources.
//   node redlock-bench.mjs --nodes 127.0.0.1:7101,... [-c 50] [-r 10000] [-d 10] [--warmup 2]
//                          [--ttl 10000] [--retry 0|default] [--autopipeline on|off]
// Prints one JSON line. Cycles count when their release completes inside the window; acquire
// latencies count for acquisitions that start inside it (the method of perf-anchors.md).
import Redis from "ioredis";
import Redlock from "redlock";

const args = {
  nodes: "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005",
  c: 50, r: 10000, d: 10, warmup: 2, ttl: 10000, retry: "0", autopipeline: "on", prefix: "nr:",
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

const settings = args.retry === "default" ? {} : { retryCount: Number(args.retry) };
const redlock = new Redlock(clients, settings);
redlock.on("error", () => {}); // per-node "no" votes are expected under contention

const latencies = []; // acquire latencies in µs, window only
let cycles = 0, failed = 0, release_failed = 0, errors = 0;
let measuring = false, running = true;

async function worker() {
  while (running) {
    const resource = args.prefix + Math.floor(Math.random() * args.r);
    const started = process.hrtime.bigint();
    const counted = measuring;
    let lock;
    try {
      lock = await redlock.acquire([resource], args.ttl);
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
const u0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
measuring = true;
await new Promise((resolve) => setTimeout(resolve, args.d * 1000));
measuring = false;
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
const u1 = process.cpuUsage(u0);
running = false;
await Promise.all(workers);
await Promise.all(clients.map((c) => c.quit()));

latencies.sort((a, b) => a - b);
const pct = (p) => latencies.length ? latencies[Math.min(latencies.length - 1,
                                                          Math.floor(p * latencies.length))] : 0;
console.log(JSON.stringify({
  tool: "node-redlock", redlock: "5.0.0-beta.2", autopipeline: args.autopipeline === "on",
  retry: args.retry, c: args.c, r: args.r, ttl: args.ttl, seconds,
  cycles, cycles_per_s: cycles / seconds, failed_acquires: failed, failed_releases: release_failed,
  errors, acquire_p50_us: pct(0.5), acquire_p99_us: pct(0.99), acquire_p999_us: pct(0.999),
  client_cpu_us_per_cycle: cycles ? (u1.user + u1.system) / cycles : 0,
}));
process.exit(0);
