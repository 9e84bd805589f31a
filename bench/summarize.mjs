// Prints scripts/bench's markdown table from its results.jsonl: medians over the rounds.
//   node bench/summarize.mjs results.jsonl "<machine>" <rounds> <seconds>
//   node bench/summarize.mjs --compare results.jsonl "<machine>" <rounds> <seconds> NEW OLD
// (--compare: the A/B table of scripts/bench --compare, labels LABEL@new and LABEL@old.)
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const compare = args[0] === "--compare";
if (compare) args.shift();
const [file, machine = "", rounds = "?", seconds = "?", new_binary = "", old_binary = ""] = args;
const runs = readFileSync(file, "utf8").trim().split("\n").map((line) => JSON.parse(line));
const median = (values) => {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const m = (label, field) => median(runs.filter((r) => r.label === label).map((r) => r.data[field]));
const n = (x, digits = 0) => Number.isFinite(x)
  ? x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
  : "n/a";
const ms = (us) => Number.isFinite(us) ? (us / 1000).toFixed(us < 10000 ? 2 : 1) : "n/a";
const ratio = (a, b) => Number.isFinite(a / b) && b > 0 ? (a / b).toFixed(2) + "×" : "n/a";
// Hand-over p50 / p99 in ms (µs precision) over the runs with hand-overs of that kind.
const handover = (label, kind) => {
  const with_some = runs.filter((r) => r.label === label && r.data[`handovers${kind}`] > 0);
  const at = (q) => median(with_some.map((r) => r.data[`handover${kind}_${q}_us`]));
  const count = median(runs.filter((r) => r.label === label)
                          .map((r) => r.data[`handovers${kind}`] ?? NaN));
  if (with_some.length === 0) return `n/a (${n(count)})`;
  return `${(at("p50") / 1000).toFixed(3)} / ${(at("p99") / 1000).toFixed(3)} (${n(count)})`;
};

if (compare) {
  console.log(`\nMachine: ${machine}. A/B: new = ${new_binary}, old = ${old_binary}; medians of ` +
              `${rounds} interleaved round(s), ${seconds} s windows, each daemon fresh per round.\n`);
  console.log("| workload | cycles/s new | cycles/s old | new / old | daemon CPU µs/cycle new | " +
              "old | new / old | acquire p99 ms new / old |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const [label, what] of [["low_p1", "R=10,000, C=50 P=1"], ["low_p8", "R=10,000, C=50 P=8"],
                               ["contended", "R=10, C=50, WAIT 10 s"],
                               ["contended_2d", "R=10, C=50 on 2 daemons, WAIT 10 s"]]) {
    const c_new = m(`${label}@new`, "cycles_per_s"), c_old = m(`${label}@old`, "cycles_per_s");
    const u_new = m(`${label}@new`, "daemon_cpu_us_per_cycle");
    const u_old = m(`${label}@old`, "daemon_cpu_us_per_cycle");
    const p_new = m(`${label}@new`, "acquire_p99_us"), p_old = m(`${label}@old`, "acquire_p99_us");
    console.log(`| ${label} (${what}) | ${n(c_new)} | ${n(c_old)} | ${ratio(c_new, c_old)} | ` +
                `${n(u_new, 1)} | ${n(u_old, 1)} | ${ratio(u_new, u_old)} | ` +
                `${ms(p_new)} / ${ms(p_old)} |`);
  }
  process.exit(0);
}

const ceiling = m("ceiling", "cycles_per_s");
const node_low = m("node_low", "cycles_per_s");
const node_cont = m("node_contended", "cycles_per_s");
const rows = [];
const row = (what, redlockd, peer, vs_peer, vs_ceiling) =>
  rows.push(`| ${what} | ${redlockd} | ${peer} | ${vs_peer} | ${vs_ceiling} |`);

for (const [label, name] of [["low_p1", "C=50 P=1"], ["low_p8", "C=50 P=8"]]) {
  const c = m(label, "cycles_per_s");
  row(`low contention R=10,000, ${name}: cycles/s`, n(c), n(node_low) + " (autopipelined)",
      ratio(c, node_low), ratio(c, ceiling));
  row(`  acquire p50 / p99 / p99.9 ms`,
      `${ms(m(label, "acquire_p50_us"))} / ${ms(m(label, "acquire_p99_us"))} / ` +
        ms(m(label, "acquire_p999_us")),
      label === "low_p1" ? `${ms(m("node_low", "acquire_p50_us"))} / ` +
        `${ms(m("node_low", "acquire_p99_us"))} / ${ms(m("node_low", "acquire_p999_us"))}` : "",
      "", "");
  row(`  daemon CPU µs/cycle (client: bench µs/cycle)`,
      `${n(m(label, "daemon_cpu_us_per_cycle"), 1)} (${n(m(label, "client_cpu_us_per_cycle"), 1)})`,
      label === "low_p1" ? `node: ${n(m("node_low", "client_cpu_us_per_cycle"), 1)}` : "", "", "");
  row(`  BUSY / NOQUORUM / ERR per run`,
      `${n(m(label, "busy"))} / ${n(m(label, "noquorum"))} / ${n(m(label, "errors"))}`,
      label === "low_p1" ? `failed acquires ${n(m("node_low", "failed_acquires"))}` : "", "", "");
}
row("single client C=1 P=1: acquire p50 / p99 ms",
    `${ms(m("single", "acquire_p50_us"))} / ${ms(m("single", "acquire_p99_us"))}`, "", "", "");
row("  cycles/s; daemon CPU µs/cycle",
    `${n(m("single", "cycles_per_s"))}; ${n(m("single", "daemon_cpu_us_per_cycle"), 1)}`,
    "", "", "");
const cont = m("contended", "cycles_per_s");
row("contended R=10, C=50, WAIT 10 s (node: default retries): cycles/s", n(cont), n(node_cont),
    ratio(cont, node_cont), ratio(cont, ceiling));
row("  acquire p50 / p99 / p99.9 ms",
    `${ms(m("contended", "acquire_p50_us"))} / ${ms(m("contended", "acquire_p99_us"))} / ` +
      ms(m("contended", "acquire_p999_us")),
    `${ms(m("node_contended", "acquire_p50_us"))} / ${ms(m("node_contended", "acquire_p99_us"))}` +
      ` / ${ms(m("node_contended", "acquire_p999_us"))}`, "", "");
row("  daemon CPU µs/cycle", n(m("contended", "daemon_cpu_us_per_cycle"), 1), "", "", "");
const handovers = (label) => `${handover(label, "_same")}; ${handover(label, "_cross")}`;
row("  hand-over p50 / p99 ms (count): same daemon; other daemon", handovers("contended"), "", "",
    "");
const cont2 = m("contended_2d", "cycles_per_s");
const some2 = m("contended_2d", "acquires") > 0; // else the percentiles and per-cycle CPU are 0s
const ms2 = (field) => some2 ? ms(m("contended_2d", field)) : "n/a";
row("contended on 2 daemons (25 connections each), R=10, WAIT 10 s: cycles/s", n(cont2), "", "",
    ratio(cont2, ceiling));
row("  acquire p50 / p99 / p99.9 ms",
    `${ms2("acquire_p50_us")} / ${ms2("acquire_p99_us")} / ${ms2("acquire_p999_us")}`, "", "", "");
row("  daemon CPU µs/cycle (both daemons)",
    m("contended_2d", "cycles") > 0 ? n(m("contended_2d", "daemon_cpu_us_per_cycle"), 1) : "n/a",
    "", "", "");
row("  hand-over p50 / p99 ms (count): same daemon; other daemon", handovers("contended_2d"), "",
    "", "");
row("10,000 KEEP locks, TTL 10 s, idle: daemon CPU % of one core",
    n(m("keep_idle", "daemon_cpu_pct"), 2), "", "", "");
row("daemon RSS: fresh / 10,000 KEEP locks / 10,000 waiters (MiB)",
    `${n(m("mem_keep", "daemon_rss_before_kb") / 1024, 1)} / ` +
      `${n(m("mem_keep", "daemon_rss_kb") / 1024, 1)} / ` +
      `${n(m("mem_waiters", "daemon_rss_kb") / 1024, 1)}`, "", "", "");
const idle_n = m("mem_idle", "idle");
const idle_kb = m("mem_idle", "daemon_rss_kb"), idle_fresh_kb = m("mem_idle", "daemon_rss_before_kb");
row(`daemon RSS with ${n(idle_n)} idle connections: MiB (fresh; bytes per connection)`,
    `${n(idle_kb / 1024, 1)} (${n(idle_fresh_kb / 1024, 1)}; ` +
      `${n((idle_kb - idle_fresh_kb) * 1024 / idle_n)})`, "", "", "");
row("Redis ceiling: daemon's acquire + release scripts by EVALSHA, -P 16: cycles/s",
    "", "", "", n(ceiling));
row("  acquire / release ops/s (sum of 5 masters)",
    `${n(m("ceiling", "acquire_ops"))} / ${n(m("ceiling", "release_ops"))}`, "", "", "");

console.log(`\nMachine: ${machine}. Medians of ${rounds} interleaved round(s), ` +
            `${seconds} s windows; ttl 10,000 ms everywhere. node-redlock 5.0.0-beta.2 + ioredis ` +
            `(autopipelining on; retryCount 0, default retries when contended).\n`);
console.log("| measurement | redlockd | node-redlock | redlockd / node-redlock | redlockd / ceiling |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const line of rows) console.log(line);
const keep_check = m("mem_keep", "daemon_keep_locks"), wait_check = m("mem_waiters", "daemon_waiters");
console.log(`\n(INFO during the memory runs: keep_locks ${keep_check}, waiters ${wait_check}.)`);

// What a cycle costs, R=10,000, C=50, 1 in flight: the daemon's CPU and the masters' (INFO cpu),
// beside node-redlock and plain Redlock (SET NX PX + compare-and-delete: the masters' floor).
const cpu = (label, field) => n(m(label, field), 1);
const floor = m("plain_low", "masters_cpu_us_per_cycle");
console.log("\nPer cycle, R=10,000, C=50, 1 in flight (µs of CPU per lock + unlock cycle; masters: " +
            "INFO cpu used_cpu_sys + used_cpu_user, summed over the 5):\n");
console.log("| client | cycles/s | daemon CPU µs/cycle | masters CPU µs/cycle | masters / floor |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const [label, name] of [["low_p1", "redlockd (TCP loopback)"],
                             ["low_p1_unix", "redlockd (Unix socket)"],
                             ["low_p8", "redlockd, 8 in flight per connection"],
                             ["node_low", "node-redlock (retryCount 0)"],
                             ["plain_low", "plain Redlock: SET NX PX + compare-and-delete (floor)"]]) {
  const has_daemon = label.startsWith("low_");
  console.log(`| ${name} | ${n(m(label, "cycles_per_s"))} | ` +
              `${has_daemon ? cpu(label, "daemon_cpu_us_per_cycle") : "-"} | ` +
              `${cpu(label, "masters_cpu_us_per_cycle")} | ` +
              `${ratio(m(label, "masters_cpu_us_per_cycle"), floor)} |`);
}
const tcp = m("low_p1", "daemon_cpu_us_per_cycle"), local = m("low_p1_unix", "daemon_cpu_us_per_cycle");
console.log(`\nUnix socket / TCP loopback (1 in flight): cycles/s ` +
            `${ratio(m("low_p1_unix", "cycles_per_s"), m("low_p1", "cycles_per_s"))}, daemon CPU per ` +
            `cycle ${ratio(local, tcp)}, acquire p50 / p99 ${ms(m("low_p1_unix", "acquire_p50_us"))} / ` +
            `${ms(m("low_p1_unix", "acquire_p99_us"))} ms against ${ms(m("low_p1", "acquire_p50_us"))} / ` +
            `${ms(m("low_p1", "acquire_p99_us"))} ms.`);

// The lock family (protocol 1.1): each kind's row beside the exclusive row of the same C and R
// and, for MLOCK, node-redlock's acquire of the same 3 resources. Absent from older results.
// [label, what, node-redlock's label, exclusive label, WAIT (hand-overs timed)]
const kind_rows = [
  ["shared_contended", "shared readers R=10 (LOCK ... SHARED, no WAIT)", "", "contended", false],
  ["permits_contended", "semaphore of 4 per name R=10, WAIT 10 s (LOCK ... PERMITS 4)", "",
   "contended", true],
  ["multi_low", "MLOCK of 3 among R=10,000 (node: acquire of 3, retryCount 0)", "node_multi_low",
   "low_p1", false],
  ["multi_contended", "MLOCK of 3 among R=10, WAIT 10 s (node: acquire of 3, default retries)",
   "node_multi_contended", "contended", true],
];
if (runs.some((r) => kind_rows.some(([label]) => r.label === label))) {
  const acquire = (label) => m(label, "acquires") > 0 || m(label, "cycles") > 0
    ? `${ms(m(label, "acquire_p50_us"))} / ${ms(m(label, "acquire_p99_us"))} / ` +
      ms(m(label, "acquire_p999_us"))
    : "n/a";
  const cpus = (label) => `${cpu(label, "daemon_cpu_us_per_cycle")} / ` +
    cpu(label, "masters_cpu_us_per_cycle");
  const replies = (label) => `${n(m(label, "busy"))} / ${n(m(label, "noquorum"))} / ` +
    `${n(m(label, "notheld"))} / ${n(m(label, "errors"))}`;
  console.log("\nLock kinds (protocol 1.1), same run: C=50, 1 in flight; a cycle is one grant and its " +
              "release (for MLOCK: a set of 3 locked, then MUNLOCK of the 3). The exclusive row is " +
              "the same C and R with WAIT (contended) or without (low_p1).\n");
  console.log("| measurement | redlockd | node-redlock | redlockd / node-redlock | " +
              "exclusive row | kind / exclusive |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const [label, what, node, exclusive, waits] of kind_rows) {
    const c = m(label, "cycles_per_s"), c_node = node ? m(node, "cycles_per_s") : NaN;
    const c_excl = m(exclusive, "cycles_per_s");
    console.log(`| ${what}: cycles/s | ${n(c)} | ${node ? n(c_node) : ""} | ` +
                `${node ? ratio(c, c_node) : ""} | ${exclusive}: ${n(c_excl)} | ${ratio(c, c_excl)} |`);
    console.log(`|   acquire p50 / p99 / p99.9 ms | ${acquire(label)} | ${node ? acquire(node) : ""} | ` +
                `| ${acquire(exclusive)} | |`);
    console.log(`|   daemon / masters CPU µs/cycle (node: masters) | ${cpus(label)} | ` +
                `${node ? cpu(node, "masters_cpu_us_per_cycle") : ""} | | ${cpus(exclusive)} | |`);
    if (waits)
      console.log(`|   hand-over p50 / p99 ms (count) | ${handover(label, "")} | | | ` +
                  `${handover(exclusive, "")} | |`);
    console.log(`|   BUSY / NOQUORUM / NOTHELD / ERR per run (node: failed acquires / errors) | ` +
                `${replies(label)} | ` +
                `${node ? `${n(m(node, "failed_acquires"))} / ${n(m(node, "errors"))}` : ""} | | ` +
                `${replies(exclusive)} | |`);
  }
}

// The peers a careful engineer would consider instead, each through its own strongest client.
if (runs.some((r) => r.label === "etcd_low" || r.label === "zk_low")) {
  console.log("\nPeers, same run (etcd 3.4 and ZooKeeper 3.8, 3 members each on loopback, default " +
              "durability: fsync; 50 workers; WAIT / lock wait 10 s on hot resources):\n");
  console.log("| workload | redlockd | node-redlock | etcd (Go clientv3 Mutex) | " +
              "ZooKeeper (Curator InterProcessMutex) | redlockd / etcd | redlockd / ZooKeeper |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  const lat = (label) => m(label, "acquires") > 0 || m(label, "cycles") > 0
    ? `${ms(m(label, "acquire_p50_us"))} / ${ms(m(label, "acquire_p99_us"))}` : "n/a";
  for (const [what, ours, node, etcd, zk] of [
    ["uncontended R=10,000, 1 in flight", "low_p1", "node_low", "etcd_low", "zk_low"],
    ["hot R=10, waiting (node: default retries)", "contended", "node_contended", "etcd_contended",
     "zk_contended"]]) {
    const c = m(ours, "cycles_per_s");
    console.log(`| ${what}: cycles/s | ${n(c)} | ${n(m(node, "cycles_per_s"))} | ` +
                `${n(m(etcd, "cycles_per_s"))} | ${n(m(zk, "cycles_per_s"))} | ` +
                `${ratio(c, m(etcd, "cycles_per_s"))} | ${ratio(c, m(zk, "cycles_per_s"))} |`);
    console.log(`|   acquire p50 / p99 ms | ${lat(ours)} | ${lat(node)} | ${lat(etcd)} | ${lat(zk)} | ` +
                `${ratio(m(etcd, "acquire_p99_us"), m(ours, "acquire_p99_us"))} lower p99 | ` +
                `${ratio(m(zk, "acquire_p99_us"), m(ours, "acquire_p99_us"))} lower p99 |`);
    const server = m(ours, "daemon_cpu_us_per_cycle") + m(ours, "masters_cpu_us_per_cycle");
    console.log(`|   server CPU µs/cycle (redlockd: daemon + masters) | ${n(server, 1)} | ` +
                `${cpu(node, "masters_cpu_us_per_cycle")} | ${cpu(etcd, "server_cpu_us_per_cycle")} | ` +
                `${cpu(zk, "server_cpu_us_per_cycle")} | | |`);
    console.log(`|   failed acquires / errors per run | ${n(m(ours, "busy"))} BUSY / ` +
                `${n(m(ours, "errors"))} | ${n(m(node, "failed_acquires"))} / ${n(m(node, "errors"))} | ` +
                `${n(m(etcd, "failed_acquires"))} / ${n(m(etcd, "errors"))} | ` +
                `${n(m(zk, "failed_acquires"))} / ${n(m(zk, "errors"))} | | |`);
  }
}
