"""Starts real redis-server masters and the real redlockd on free loopback ports for the tests.

REDLOCKD_BIN names the daemon (default <repo>/build/redlockd), REDIS_SERVER the redis-server
binary (default: from PATH). A missing binary is an error that says what is missing: the tests
fail, they are not skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def redlockd_bin() -> str:
    path = os.environ.get("REDLOCKD_BIN") or str(REPO / "build" / "redlockd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"redlockd binary not found at {path}: build it (cmake --build build "
                           f"--target redlockd) or set REDLOCKD_BIN")
    return path


def redis_server_bin() -> str:
    path = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("redis-server not found: install redis-server or set REDIS_SERVER")
    return path


def openssl_bin() -> str:
    path = shutil.which("openssl")
    if not path:
        raise RuntimeError("the openssl CLI is needed for the TLS test: install openssl")
    return path


def free_port() -> int:
    """A port the kernel just gave out on 127.0.0.1 (redis-server --port 0 is not discoverable)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eventually(predicate, timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Polls predicate until it is true or timeout seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def tail(path: Path, size: int = 8000) -> str:
    try:
        return path.read_bytes()[-size:].decode("utf-8", "replace")
    except OSError:
        return ""


class Redis:
    def __init__(self, directory: Path):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = directory / "redis.log"
        self.proc = None
        self.port = 0
        last = ""
        for _ in range(5):  # the free port may be taken by someone else before redis binds it
            self.port = free_port()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [redis_server_bin(), "--port", str(self.port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--protected-mode", "no",
                     "--dir", str(self.dir)],
                    stdout=log, stderr=subprocess.STDOUT)
            if eventually(lambda: self._pings() or self.proc.poll() is not None, 10.0):
                if self.proc.poll() is None:
                    return
            self.kill()
            last = tail(self.log, 2000)
        raise RuntimeError(f"redis-server did not start:\n{last}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _pings(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Fleet:
    def __init__(self, count: int = 5):
        self.tmp = tempfile.TemporaryDirectory(prefix="redlockd-py-fleet-")
        self.nodes: list[Redis] = []
        try:
            for i in range(count):
                self.nodes.append(Redis(Path(self.tmp.name) / f"node{i}"))
        except BaseException:
            self.close()
            raise

    @property
    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    def kill(self, i: int) -> None:
        self.nodes[i].kill()

    def close(self) -> None:
        for n in self.nodes:
            n.kill()
        self.tmp.cleanup()


def _line_request(port: int, lines: list[str], context: ssl.SSLContext | None) -> list[str]:
    with socket.create_connection(("127.0.0.1", port), timeout=2.0) as raw:
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
        with sock:
            return _exchange(sock, lines)


def _exchange(sock: socket.socket, lines: list[str]) -> list[str]:
    sock.sendall("".join(line + "\n" for line in lines).encode())
    data = b""
    while data.count(b"\n") < len(lines):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode().splitlines()


class Daemon:
    """redlockd on a free port in front of `nodes`; `extra` is merged into its JSON config."""

    def __init__(self, nodes: list[str], extra: dict | None = None, env: dict | None = None,
                 secret: str | None = None, tls_context: ssl.SSLContext | None = None):
        self.tmp = tempfile.TemporaryDirectory(prefix="redlockd-py-daemon-")
        self.dir = Path(self.tmp.name)
        self.log = self.dir / "redlockd.log"
        self.nodes = nodes
        self.secret = secret
        self.tls_context = tls_context
        self.extra = extra or {}
        self.env = dict(os.environ, **(env or {}))
        self.proc = None
        last = ""
        for _ in range(5):
            self.port = free_port()
            config = {"listen": f"127.0.0.1:{self.port}", "nodes": nodes, "node_timeout_ms": 250}
            config.update(self.extra)
            (self.dir / "redlockd.json").write_text(json.dumps(config, indent=2))
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [redlockd_bin(), "--config", str(self.dir / "redlockd.json")],
                    stdout=log, stderr=subprocess.STDOUT, env=self.env)
            if eventually(lambda: self.proc.poll() is not None or self._ready(), 15.0):
                if self.proc.poll() is None:
                    return
            self.kill()
            last = tail(self.log)
        self.tmp.cleanup()
        raise RuntimeError(f"redlockd did not become ready; log:\n{last}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _ready(self) -> bool:
        try:
            info = self.info()
        except (OSError, ValueError, RuntimeError):
            return False
        return sum(1 for n in info.get("nodes", []) if n.get("state") == "ok") == len(self.nodes)

    def info(self) -> dict:
        lines = ([f"AUTH {self.secret}"] if self.secret else []) + ["INFO"]
        replies = _line_request(self.port, lines, self.tls_context)
        if len(replies) != len(lines) or not replies[-1].startswith("OK "):
            raise RuntimeError(f"INFO: {replies}")
        return json.loads(replies[-1][3:])

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        self.tmp.cleanup()


def make_pki(directory: Path) -> dict:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate,
    made with the openssl CLI."""
    openssl = openssl_bin()

    def run(*args: str) -> None:
        result = subprocess.run([openssl, *args], cwd=directory, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} failed: {result.stderr}")

    run("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-subj", "/CN=redlockd python test ca", "-days", "2", "-out", "ca.crt")
    (directory / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                       "extendedKeyUsage=serverAuth,clientAuth\n")
    for name in ("server", "client"):
        run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-subj", f"/CN={name}", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", f"{name}.crt")
    return {name: str(directory / name)
            for name in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}


def serve() -> None:
    """`python3 tests/harness.py serve`: five masters and a daemon for a program outside the test
    suites (scripts/test-clients' package checks). Prints the daemon's address on one line, then
    keeps everything running until standard input is closed."""
    import sys

    fleet = Fleet(5)
    try:
        daemon = Daemon(fleet.addresses)
        try:
            print(daemon.address, flush=True)
            sys.stdin.read()
        finally:
            daemon.close()
    finally:
        fleet.close()


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: harness.py serve")
    serve()
