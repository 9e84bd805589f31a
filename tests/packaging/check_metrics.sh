#!/usr/bin/env bash
# The daemon's /metrics against Prometheus' own linter, and the shipped alert rules and Grafana
# dashboard against what the daemon exports:
#   1. starts one redis-server and redlockd (metrics_listen) from BUILD_DIR on free loopback
#      ports, sends LOCK, EXTEND, UNLOCK and a bad request, and reads /metrics;
#   2. promtool check metrics on that exposition;
#   3. promtool check rules config/prometheus/redlockd-alerts.yml, and promtool test rules with
#      tests/packaging/redlockd-alerts.test.yml (the alerts fire when they should);
#   4. every metric name the rules and config/grafana/redlockd-dashboard.json use is exported.
#   tests/packaging/check_metrics.sh BUILD_DIR
# Needs promtool (Debian package prometheus), redis-server and python3. A missing tool fails.
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
rules=$root/config/prometheus/redlockd-alerts.yml
dashboard=$root/config/grafana/redlockd-dashboard.json

missing=()
for tool in promtool:prometheus redis-server:redis-server python3:python3; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool%%:*} (Debian package ${tool#*:})")
done
[ ${#missing[@]} -eq 0 ] || { echo "FAIL: missing ${missing[*]}; scripts/setup --test installs them"; exit 1; }
[ -x "$build/redlockd" ] || { echo "FAIL: $build/redlockd is not built"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

failed=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# Three free loopback ports, below the kernel's ephemeral range (no connection takes them).
read -r redis_port listen_port metrics_port < <(python3 "$root/tests/support/free_ports.py" 3)
[ -n "$metrics_port" ] || { echo "FAIL: tests/support/free_ports.py found no free ports"; exit 1; }

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
cat >"$work/redlockd.json" <<JSON
{"listen": "127.0.0.1:$listen_port", "nodes": ["127.0.0.1:$redis_port"],
 "metrics_listen": "127.0.0.1:$metrics_port"}
JSON
"$build/redlockd" --config "$work/redlockd.json" 2>"$work/redlockd.log" &
pids+=($!)

# The traffic, then the scrape, over plain sockets (python: no curl or nc needed).
if ! python3 - "$listen_port" "$metrics_port" "$work/metrics.txt" <<'PY'; then
import socket, sys, time, urllib.request
listen, metrics, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + 30  # a start-up bound, not a measurement
while True:
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{metrics}/healthz", timeout=2).status == 200:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("redlockd did not report a quorum on /healthz within 30 s")
    time.sleep(0.1)
conn = socket.create_connection(("127.0.0.1", listen))
f = conn.makefile("rw", newline="\n")
def ask(line):
    f.write(line + "\n"); f.flush()
    return f.readline().strip()
reply = ask("LOCK metrics:check 10000")
assert reply.startswith("OK "), reply
owner = reply.split()[1]
assert ask(f"EXTEND metrics:check {owner} 10000").startswith("OK "), "EXTEND"
assert ask("LOCK metrics:check 10000").startswith("BUSY"), "second LOCK"
assert ask(f"UNLOCK metrics:check {owner}") == "OK", "UNLOCK"
assert ask("LOCK").startswith("ERR"), "bad LOCK"
open(out, "w").write(urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read().decode())
PY
  fail "could not talk to redlockd; its log:"
  sed 's/^/     /' "$work/redlockd.log"
  exit 1
fi
ok "scraped /metrics after LOCK, EXTEND, BUSY, UNLOCK and a bad request ($(grep -vc '^#' "$work/metrics.txt") samples)"

if out=$(promtool check metrics <"$work/metrics.txt" 2>&1); then
  ok "promtool check metrics${out:+: $out}"
else
  fail "promtool check metrics:"
  printf '%s\n' "$out" | sed 's/^/     /'
fi
if out=$(promtool check rules "$rules" 2>&1); then
  ok "promtool check rules $(basename "$rules"): $(grep -o '[0-9]* rules found' <<<"$out")"
else
  fail "promtool check rules $rules:"
  printf '%s\n' "$out" | sed 's/^/     /'
fi

# The rules fire on the series the daemon exports, and stay quiet otherwise.
if out=$(cd "$root/tests/packaging" && promtool test rules redlockd-alerts.test.yml 2>&1); then
  ok "promtool test rules redlockd-alerts.test.yml"
else
  fail "promtool test rules tests/packaging/redlockd-alerts.test.yml:"
  printf '%s\n' "$out" | sed 's/^/     /'
fi

# Names the rules and the dashboard use; a histogram's _bucket/_sum/_count are samples too.
exported=$(grep -v '^#' "$work/metrics.txt" | sed 's/[{ ].*//' | sort -u)
for want in 'redlockd_results_total{op="lock",outcome="ok"} 1' \
  'redlockd_results_total{op="lock",outcome="busy"} 1' \
  'redlockd_results_total{op="extend",outcome="ok"} 1' \
  'redlockd_results_total{op="unlock",outcome="ok"} 1' \
  'redlockd_results_total{op="other",outcome="error"} 1' \
  "redlockd_node_state{node=\"127.0.0.1:$redis_port\",state=\"ok\"} 1" \
  'redlockd_quorum 1' 'redlockd_nodes_voting 1'; do
  grep -qxF "$want" "$work/metrics.txt" || fail "/metrics lacks the sample: $want"
done
for want in redlockd_build_info process_cpu_seconds_total process_resident_memory_bytes \
  process_open_fds process_max_fds process_start_time_seconds; do
  grep -qx "$want" <<<"$exported" || fail "/metrics lacks $want"
done
used=$(python3 - "$rules" "$dashboard" <<'PY'
import json, re, sys
import yaml
exprs = []
for group in yaml.safe_load(open(sys.argv[1]))["groups"]:
    exprs += [rule["expr"] for rule in group["rules"]]
def walk(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                exprs.append(value)
            elif key == "query" and isinstance(value, dict) and "query" in value:
                exprs.append(value["query"])
            else:
                walk(value)
    elif isinstance(node, list):
        for item in node:
            walk(item)
walk(json.load(open(sys.argv[2])))
print("\n".join(sorted({m for e in exprs for m in re.findall(r"\b(?:redlockd|process)_[a-z_]+", e)})))
PY
) || { fail "cannot read the rules or the dashboard (python3-yaml?)"; used=""; }
[ -n "$used" ] || fail "no metric names found in the rules and the dashboard"
for name in $used; do
  grep -qx "$name" <<<"$exported" || fail "$name is used by the alert rules or the dashboard but not exported"
done
[ -z "$used" ] || ok "the rules and the dashboard use $(wc -w <<<"$used") metric names, all exported"

if [ "$failed" -gt 0 ]; then
  echo "$failed check(s) failed"
  exit 1
fi
echo "metrics, rules and dashboard agree"
