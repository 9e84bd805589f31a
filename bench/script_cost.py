#!/usr/bin/env python3
"""What each script costs a master, in instructions, counted by valgrind (callgrind).

Timings on a shared 2-core machine vary by 20 % from run to run; the instructions a
redis-server executes for a call do not. This starts its own redis-server under callgrind on a
free loopback port, runs each script in the state the workloads put it in (EVALSHA of the text
as the build assembles it: <build>/generated/lua/), and prints the instructions per call beside
the floor a plain Redlock client costs (SET NX PX, and a compare-and-delete script). Each row is
measured as the difference between N calls with their set-up commands and the set-up commands
alone, so that only the call counts. Nothing asserts anything.

  bench/script_cost.py [--generated DIR] [--old DIR] [--calls N]

--old DIR adds a column for another build's scripts (an A/B of two commits' generated/lua/).
Needs valgrind (scripts/setup --bench) and redis-server.
"""
import argparse
import os
import glob
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Connection:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.reader = self.sock.makefile("rb")

    def read(self):
        line = self.reader.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if kind in b"+:":
            return rest
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.reader.read(n + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError("connection closed")

    def pipeline(self, commands):
        for start in range(0, len(commands), 200):
            batch = commands[start:start + 200]
            self.sock.sendall(b"".join(encode(*c) for c in batch))
            for _ in batch:
                self.read()

    def command(self, *args):
        self.sock.sendall(encode(*args))
        return self.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OWNER = "%040x"
DAEMON = "abc1"
OTHER = "def2"
WAKE = DAEMON + " 200 ch"  # a granted lock's release: '<daemon id> <slack ms> <channel>'
M = "F:max_ttl"  # the longest-TTL record: the fence key's name and ':max_ttl'
CAD = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def scenarios(script, acquire_keys):
    """(name, what, set-up commands for call i, the measured command for call i).

    acquire_keys: the registers acquire.lua is given after the lock key (older builds take the
    longest-TTL record's key too; newer ones make it from the fence key's name)."""
    far = 99999999999999  # an until far in the future: the entry stays live
    rows = []
    rows.append(("floor: SET NX PX", "a plain Redlock client's acquire on one master",
                 lambda i: [], lambda i: ("set", "k%d" % i, OWNER % i, "NX", "PX", 10000)))
    rows.append(("floor: compare-and-delete", "its release (EVALSHA), the key held",
                 lambda i: [("set", "k%d" % i, OWNER % i, "PX", 10000)],
                 lambda i: ("evalsha", script("cad"), 1, "k%d" % i, OWNER % i)))
    rows.append(("acquire", "LOCK on a free key: grant, fence, longest TTL",
                 lambda i: [],
                 lambda i: ("evalsha", script("acquire"), 1 + len(acquire_keys), "k%d" % i,
                            *acquire_keys, OWNER % i, 10000, 1000 + i)))
    rows.append(("release", "UNLOCK, no wait mark",
                 lambda i: [("set", "k%d" % i, OWNER % i, "PX", 10000)],
                 lambda i: ("evalsha", script("release"), 2, "k%d" % i, "W%d" % i, OWNER % i,
                            WAKE)))
    rows.append(("release", "UNLOCK, the mark only this daemon's entry",
                 lambda i: [("set", "k%d" % i, OWNER % i, "PX", 10000),
                            ("set", "W%d" % i, "%s 5 %d;" % (DAEMON, far), "PX", 10000)],
                 lambda i: ("evalsha", script("release"), 2, "k%d" % i, "W%d" % i, OWNER % i,
                            WAKE)))
    # A hot hand-over: the holder's key goes to the head waiter, a next waiter stays queued
    # (its entry is kept), the mark holds this daemon's entry only (one daemon).
    rows.append(("hand_over", "UNLOCK to this daemon's head, a next waiter queued",
                 lambda i: [("set", "k%d" % i, OWNER % i, "PX", 10000),
                            ("set", "W%d" % i, "%s 5 %d;" % (DAEMON, far), "PX", 10000)],
                 lambda i: ("evalsha", script("hand_over"), 4, "k%d" % i, "F", M, "W%d" % i,
                            OWNER % (i + 1 << 20), 10000, 1000 + i, 9000, DAEMON, 5, 200,
                            OWNER % i, "ch", 9000)))
    # A head refused by the holder while another daemon's younger head is marked too.
    rows.append(("acquire_wait", "a head refused, another daemon's head marked",
                 lambda i: [("set", "k%d" % i, OWNER % i, "PX", 10000),
                            ("set", "W%d" % i, "%s 9 %d;" % (OTHER, far), "PX", 10000)],
                 lambda i: ("evalsha", script("acquire_wait"), 4, "k%d" % i, "F", M, "W%d" % i,
                            OWNER % (i + 1 << 20), 10000, 1000 + i, 9000, DAEMON, 5, 200, 0)))
    return rows


class Server:
    def __init__(self, valgrind, workdir):
        self.port = free_port()
        self.workdir = workdir
        self.proc = subprocess.Popen(
            [valgrind, "--tool=callgrind", "--callgrind-out-file=%s/cg.out" % workdir,
             "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                self.conn = Connection(self.port)
                self.conn.command("ping")
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("redis-server under valgrind did not start")

    def instructions(self, commands):
        """Instructions redis-server executes for `commands` (pipelined)."""
        for f in glob.glob(self.workdir + "/cg.out*"):
            os.remove(f)
        subprocess.run(["callgrind_control", "-z", str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn.pipeline(commands)
        subprocess.run(["callgrind_control", "-d", str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            dumps = [f for f in glob.glob(self.workdir + "/cg.out.*")]
            for dump in dumps:
                with open(dump) as text:
                    for line in text:
                        if line.startswith(("summary:", "totals:")):
                            return int(line.split()[1])
            time.sleep(0.1)
        raise RuntimeError("no callgrind dump")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def measure(server, generated, calls):
    texts = {"cad": CAD}
    for path in glob.glob(os.path.join(generated, "*.lua")):
        with open(path) as f:
            texts[os.path.basename(path)[:-4]] = f.read()
    conn = server.conn
    conn.command("flushall")
    conn.command("script", "flush")
    shas = {name: conn.command("script", "load", text).decode() for name, text in texts.items()}
    out = []
    acquire_keys = ("F", M) if "KEYS[3]" in texts["acquire"] else ("F",)
    for name, what, setup, call in scenarios(lambda n: shas[n], acquire_keys):
        def run(with_call, base):
            conn.command("flushall")
            conn.command("set", "F", "1")  # the fence register every master a daemon uses holds
            commands = []
            for i in range(base, base + calls):
                commands += setup(i)
                if with_call:
                    commands.append(call(i))
            return server.instructions(commands)
        run(True, 10**6)  # warm: allocator, dictionaries, the scripts' first runs
        alone = run(False, 0)
        both = run(True, 0)
        out.append((name, what, (both - alone) / calls))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--generated", default=None)
    parser.add_argument("--old", default=None)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    generated = args.generated
    if generated is None:
        for build in ("build-bench", "build"):
            candidate = os.path.join(root, build, "generated", "lua")
            if os.path.isdir(candidate):
                generated = candidate
                break
    if generated is None or not os.path.isdir(generated):
        sys.exit("script_cost: no generated/lua/ (build first, or give --generated DIR)")
    valgrind = shutil.which("valgrind")
    if not valgrind or not shutil.which("callgrind_control") or not shutil.which("redis-server"):
        sys.exit("script_cost: needs valgrind and redis-server (scripts/setup --bench)")
    with tempfile.TemporaryDirectory(prefix="redlockd-script-cost.") as workdir:
        server = Server(valgrind, workdir)
        try:
            new = measure(server, generated, args.calls)
            old = measure(server, args.old, args.calls) if args.old else None
        finally:
            server.stop()
    print("Instructions a redis-server executes per call (valgrind callgrind, %d calls, thousands);"
          % args.calls)
    print("new = %s%s\n" % (generated, ", old = " + args.old if args.old else ""))
    header = "| script | state | new |" + (" old | new / old |" if old else "")
    print(header)
    print("| --- | --- | ---: |" + (" ---: | ---: |" if old else ""))
    for k, (name, what, cost) in enumerate(new):
        row = "| %s | %s | %.1f |" % (name, what, cost / 1000)
        if old:
            row += " %.1f | %.2f× |" % (old[k][2] / 1000, cost / old[k][2])
        print(row)
    floor = new[0][2] + new[1][2]
    cycle = new[2][2] + new[3][2]
    print("\nUncontended cycle on one master (acquire + release, no mark): %.1fk, %.2f× the plain"
          " Redlock floor (SET NX PX + compare-and-delete: %.1fk)." % (cycle / 1000, cycle / floor,
                                                                       floor / 1000))


if __name__ == "__main__":
    main()
