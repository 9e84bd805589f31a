#!/usr/bin/env bash
# Under systemd (JOURNAL_STREAM names its stderr) redlockd logs to the journal, each record with
# its priority; otherwise to stderr. No journald is needed: in a private mount namespace
# (unshare -m, root) a tmpfs over /run holds a stand-in journal socket,
# /run/systemd/journal/socket, that records the datagrams sd_journal_send writes.
# The daemon starts with an unreachable master (logged at warning) and is stopped with SIGTERM.
#   tests/packaging/check_journal.sh BUILD_DIR
# Needs root, unshare and mount (util-linux, mount) and python3. A missing one fails.
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$build/redlockd" ] || { echo "FAIL: $build/redlockd is not built"; exit 1; }
for tool in unshare mount python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found"; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "FAIL: unshare -m needs root (CI runs as root)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/run.sh" <<'SH'
#!/usr/bin/env bash
# Inside the namespace: $1 redlockd, $2 work dir, $3 "journal" or "stderr".
set -u
redlockd=$1 work=$2 mode=$3
mount -t tmpfs tmpfs /run || exit 1
mkdir -p /run/systemd/journal
python3 - "$work" <<'PY' &
import os, socket, sys
work = sys.argv[1]
journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
journal.bind("/run/systemd/journal/socket")
open(os.path.join(work, "ready"), "w").close()
with open(os.path.join(work, "datagrams"), "wb") as out:
    while True:
        datagram = journal.recv(1 << 16)
        if datagram == b"STOP":  # sent after the daemon exited: everything before it is in
            break
        out.write(datagram + b"\0")
        out.flush()
PY
receiver=$!
for _ in $(seq 200); do [ -e "$work/ready" ] && break; sleep 0.05; done
printf '{"listen": "127.0.0.1:%s", "nodes": ["127.0.0.1:1"]}\n' "$(cat "$work/port")" \
  >"$work/redlockd.json"
exec 3>&2 2>"$work/stderr"
if [ "$mode" = journal ]; then
  JOURNAL_STREAM=$(stat -c '%d:%i' "$work/stderr")
  export JOURNAL_STREAM
  log=$work/datagrams
else
  unset JOURNAL_STREAM
  log=$work/stderr
fi
"$redlockd" --config "$work/redlockd.json" &
daemon=$!
# Master 127.0.0.1:1 refuses connections: the daemon logs that at warning. Then stop it.
for _ in $(seq 200); do grep -qa unreachable "$log" && break; sleep 0.05; done
kill -TERM "$daemon"
wait "$daemon"
echo $? >"$work/status"
exec 2>&3
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b"STOP", "/run/systemd/journal/socket")'
wait "$receiver"
exit 0
SH

check() { # mode
  local mode=$1 dir=$work/$1
  mkdir -p "$dir"
  python3 "$root/tests/support/free_ports.py" 1 >"$dir/port" ||
    { echo "FAIL ($mode) no free loopback port"; return 1; }
  unshare -m bash "$work/run.sh" "$build/redlockd" "$dir" "$mode" ||
    { echo "FAIL ($mode) could not set up the namespace"; return 1; }
  python3 - "$dir" "$mode" <<'PY'
import os, sys
work, mode = sys.argv[1], sys.argv[2]
status = open(os.path.join(work, "status")).read().strip()
stderr = open(os.path.join(work, "stderr")).read()
raw = open(os.path.join(work, "datagrams"), "rb").read() if os.path.exists(os.path.join(work, "datagrams")) else b""
records = []
for datagram in filter(None, raw.split(b"\0")):
    fields = {}
    for line in datagram.split(b"\n"):
        if b"=" in line:
            key, value = line.split(b"=", 1)
            fields[key.decode()] = value.decode(errors="replace")
    records.append(fields)
problems = []
if status != "0":
    problems.append(f"redlockd exited {status} after SIGTERM, expected 0")
if mode == "journal":
    if stderr.strip():
        problems.append(f"stderr is not empty under JOURNAL_STREAM: {stderr!r}")
    priorities = {r.get("PRIORITY") for r in records}
    if not records:
        problems.append("nothing reached the journal socket")
    if any(r.get("SYSLOG_IDENTIFIER") != "redlockd" for r in records):
        problems.append(f"SYSLOG_IDENTIFIER: {[r.get('SYSLOG_IDENTIFIER') for r in records]}")
    if not any(r.get("PRIORITY") == "6" and "listening on" in r.get("MESSAGE", "") for r in records):
        problems.append("no info record (PRIORITY=6) saying 'listening on'")
    if not any(r.get("PRIORITY") == "4" and "unreachable" in r.get("MESSAGE", "") for r in records):
        problems.append("no warning record (PRIORITY=4) saying the master is unreachable")
    summary = f"{len(records)} journal records, priorities {sorted(priorities)}, stderr empty"
else:
    if records:
        problems.append(f"{len(records)} records reached the journal without JOURNAL_STREAM")
    if " info redlockd " not in stderr or " warning node 127.0.0.1:1 unreachable" not in stderr:
        problems.append(f"stderr lacks the info and warning lines: {stderr!r}")
    summary = f"{len(stderr.splitlines())} lines on stderr, none in the journal"
if problems:
    print(f"FAIL ({mode}) " + "; ".join(problems))
    sys.exit(1)
print(f"ok   ({mode}) {summary}")
PY
}

failed=0
check journal || failed=$((failed + 1))
check stderr || failed=$((failed + 1))
[ "$failed" -eq 0 ] || { echo "$failed check(s) failed"; exit 1; }
echo "journal under JOURNAL_STREAM, stderr otherwise"
