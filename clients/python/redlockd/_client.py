"""The implementation behind `redlockd`: one pipelined connection, one I/O thread per connection."""

from __future__ import annotations

import collections
import select
import socket
import ssl
import threading
import time
from typing import Callable, Iterable, Optional, Union

from . import _protocol as proto
from ._protocol import (
    AuthError,
    ConnectionLost,
    NotHeld,
    RedlockdError,
    ServerError,
    Status,
    Unavailable,
)

__all__ = ["Client", "Lease"]


# ----------------------------------------------------------------------------------------------
# One connection


class _KeepState:
    """What the I/O thread knows of one KEEP lock: whether it is lost, and who to tell."""

    def __init__(self, resource: str, owner: str):
        self.resource = resource
        self.owner = owner
        self.lost = threading.Event()
        self.reason = ""
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def add_callback(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if not self.lost.is_set():
                self._callbacks.append(callback)
                return
        _call_soon(callback)

    def detach(self) -> None:
        with self._lock:
            self._callbacks = []

    def mark_lost(self, reason: str) -> None:
        with self._lock:
            if self.lost.is_set():
                return
            self.reason = reason
            self.lost.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call_soon(callback)


def _call_soon(callback: Callable[[], None]) -> None:
    # Never on the I/O thread: a callback that calls the client would wait for a reply that only
    # the I/O thread can read.
    threading.Thread(target=callback, name="redlockd-on-lost", daemon=True).start()


class _Pending:
    """One request in flight. Replies come in request order, so the I/O thread resolves the head."""

    __slots__ = ("line", "resource", "keep", "is_lock", "done", "reply", "error", "state",
                 "abandoned", "_lock", "wait", "deadline")

    def __init__(self, line: str, resource: str = "", keep: bool = False, is_lock: bool = False,
                 wait: float = 0.0):
        self.line = line
        self.wait = wait  # the WAIT it carries: its reply may take that long
        self.deadline = 0.0
        self.resource = resource
        self.keep = keep
        self.is_lock = is_lock
        self.done = threading.Event()
        self.reply: Optional[str] = None
        self.error: Optional[BaseException] = None
        self.state: Optional[_KeepState] = None
        self.abandoned = False
        self._lock = threading.Lock()

    def resolve(self, conn: "_Conn", reply: Optional[str], error: Optional[BaseException]) -> None:
        with self._lock:
            self.reply, self.error = reply, error
            abandoned = self.abandoned
            self.done.set()
        if abandoned:
            self._clean_up(conn)

    def abandon(self, conn: "_Conn") -> None:
        """The caller stopped waiting (an exception such as KeyboardInterrupt). The reply will
        still come and be consumed in order; if it grants a lock, that lock is released."""
        with self._lock:
            if not self.done.is_set():
                self.abandoned = True
                return
        self._clean_up(conn)

    def _clean_up(self, conn: "_Conn") -> None:
        if self.is_lock and self.reply is not None and self.reply.startswith("OK "):
            owner = self.reply.split(" ")[1]
            conn.forget_keep(owner)
            conn.send_nowait(f"UNLOCK {self.resource} {owner}")


class _Conn:
    """A connected socket (plain or TLS) served by one I/O thread that does every read and write,
    so an ssl.SSLSocket is never used from two threads at once."""

    def __init__(self, sock: socket.socket, address: str, on_close: Callable[["_Conn"], None],
                 timeout: Optional[float] = None):
        self.address = address
        self._timeout = timeout
        self._head_deadline = 0.0
        self._sock = sock
        self._on_close = on_close
        self._lock = threading.Lock()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._out = bytearray()
        self._keeps: dict[str, _KeepState] = {}
        self.closed = False
        self._closing = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        sock.setblocking(False)
        self._thread = threading.Thread(target=self._run, name=f"redlockd-io-{address}",
                                        daemon=True)
        self._thread.start()

    # -- used by callers

    def send(self, pending: _Pending) -> None:
        with self._lock:
            if self.closed or self._closing:
                raise ConnectionLost(f"connection to {self.address} is closed")
            if self._timeout is not None:
                pending.deadline = time.monotonic() + self._timeout + pending.wait
                if not self._pending:
                    self._head_deadline = pending.deadline
            self._pending.append(pending)
            self._out += pending.line.encode("ascii") + b"\n"
        self._wake()

    def send_nowait(self, line: str) -> None:
        """A request whose reply nobody waits for (it is still read, in its turn)."""
        try:
            self.send(_Pending(line))
        except ConnectionLost:
            pass

    def forget_keep(self, owner: str) -> None:
        with self._lock:
            self._keeps.pop(owner, None)

    def close(self) -> None:
        with self._lock:
            self._closing = True
        self._wake()

    # -- the I/O thread

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _run(self) -> None:
        reason: BaseException = ConnectionLost(f"connection to {self.address} closed")
        buffer = bytearray()
        # poll, not select: select fails on descriptors above 1023, common in busy processes.
        poller = select.poll()
        sock_fd, wake_fd = self._sock.fileno(), self._wake_r.fileno()
        poller.register(wake_fd, select.POLLIN)
        try:
            while True:
                with self._lock:
                    if self._closing:
                        reason = ConnectionLost(f"connection to {self.address} closed by the client")
                        break
                    want_write = bool(self._out)
                    wait_ms = None
                    if self._timeout is not None and self._pending:
                        # Only the head can be late: the others' replies come after it.
                        left = self._head_deadline - time.monotonic()
                        if left <= 0:
                            reason = ConnectionLost(f"no reply from {self.address} within "
                                                    f"{self._timeout:g} s: daemon hung?")
                            break
                        wait_ms = max(1, int(left * 1000) + 1)
                poller.register(sock_fd, select.POLLIN | (select.POLLOUT if want_write else 0))
                events = dict(poller.poll(wait_ms))
                if events.get(wake_fd):
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, InterruptedError):
                        pass
                if want_write:
                    self._flush()
                if not self._read(buffer):
                    reason = ConnectionLost(f"{self.address} closed the connection")
                    break
        except (OSError, ValueError) as error:
            reason = ConnectionLost(f"connection to {self.address} failed: {error}")
        except RedlockdError as error:
            reason = ConnectionLost(f"connection to {self.address}: {error}")
        self._shut(reason)

    def _flush(self) -> None:
        with self._lock:
            data = bytes(self._out[:262144])
        try:
            sent = self._sock.send(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            return
        with self._lock:
            del self._out[:sent]

    def _read(self, buffer: bytearray) -> bool:
        """Reads what is there and handles every complete line; False at end of stream."""
        while True:
            try:
                data = self._sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                return True
            if not data:
                return False
            buffer += data
            while True:
                end = buffer.find(b"\n")
                if end < 0:
                    break
                line = buffer[:end].decode("ascii", "replace").rstrip("\r")
                del buffer[: end + 1]
                self._line(line)

    def _line(self, line: str) -> None:
        if line.startswith("LOST "):  # a push, never a reply: it can come between any two replies
            parts = line.split(" ")
            if len(parts) >= 3:
                with self._lock:
                    state = self._keeps.pop(parts[2], None)
                if state is not None and state.resource == parts[1]:
                    state.mark_lost("the daemon could not renew the lock (LOST)")
            return
        with self._lock:
            pending = self._pending.popleft() if self._pending else None
            if self._pending and self._timeout is not None:
                # The new head may have waited behind a slow WAIT: its clock starts now at most.
                self._head_deadline = max(self._pending[0].deadline,
                                          time.monotonic() + self._timeout)
            if pending is not None and pending.keep and line.startswith("OK "):
                # Registered before the next line is read: a LOST may follow right away.
                owner = line.split(" ")[1]
                pending.state = _KeepState(pending.resource, owner)
                self._keeps[owner] = pending.state
        if pending is None:
            raise ServerError("PROTOCOL", f"a reply with no request waiting for it: {line!r}")
        pending.resolve(self, line, None)

    def _shut(self, reason: BaseException) -> None:
        with self._lock:
            self.closed = True
            pending, self._pending = list(self._pending), collections.deque()
            keeps, self._keeps = list(self._keeps.values()), {}
        for s in (self._sock, self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass
        # KEEP leases first: a caller that sees its call fail finds them lost already.
        for state in keeps:
            # A KEEP lock lives exactly as long as its connection: it does not survive a failover.
            state.mark_lost(f"connection to {self.address} lost: {reason}")
        for p in pending:
            p.resolve(self, None, reason)
        self._on_close(self)


# ----------------------------------------------------------------------------------------------
# The public API


class Lease:
    """A lock held through redlockd. Use it as a context manager, or call release()."""

    def __init__(self, client: "Client", resource: str, owner: str, fence: int, validity: float,
                 keep: bool, state: Optional[_KeepState], conn: Optional[_Conn],
                 on_lost: Optional[Callable[["Lease"], None]]):
        self.resource = resource
        self.owner = owner  # the capability to unlock or extend: treat it like a password
        self.fence = fence  # pass it to the storage, which must refuse smaller ones
        self.validity = validity  # seconds the lock was guaranteed when the reply was written
        self.keep = keep
        self.expires_at = time.monotonic() + validity  # monotonic; a lower bound of the truth
        self._client = client
        self._state = state
        self._conn = conn
        self._released = False
        # Set when a KEEP lock is lost (LOST pushed, or its connection failed). A plain lease is
        # never "lost" this way: it ends by its TTL; watch `expires_at`.
        self.lost = state.lost if state is not None else threading.Event()
        if state is not None and on_lost is not None:
            state.add_callback(lambda: on_lost(self))

    @property
    def lost_reason(self) -> str:
        return self._state.reason if self._state is not None else ""

    def remaining(self) -> float:
        """Seconds of guaranteed validity left (0 when lost)."""
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.expires_at - time.monotonic())

    def extend(self, ttl: float) -> float:
        """EXTEND to `ttl` seconds from now; returns the new validity in seconds."""
        validity = self._client.extend(self.resource, self.owner, ttl)
        self.validity = validity
        self.expires_at = time.monotonic() + validity
        return validity

    def release(self) -> None:
        """UNLOCK. Raises NotHeld if the lock had already expired (unless it was reported lost)."""
        if self._released:
            return
        self._released = True
        if self._conn is not None:
            self._conn.forget_keep(self.owner)
        try:
            self._client.unlock(self.resource, self.owner)
        except (NotHeld, ConnectionError):
            if self.lost.is_set():
                return  # already reported; nothing more to say
            raise
        finally:
            if self._state is not None:
                self._state.detach()  # a LOST for a released lock is no news

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.release()
        except RedlockdError:
            if exc_type is None:
                raise  # else the block's own exception is the one worth seeing

    def __repr__(self) -> str:
        return (f"Lease(resource={self.resource!r}, fence={self.fence}, keep={self.keep}, "
                f"lost={self.lost.is_set()})")


class Client:
    """A redlockd client over one pipelined connection, safe to share between threads.

    addresses: "host:port" strings (or one comma-separated string), tried in order; on a
    connection failure the next call connects to the next one.
    secret: sent with AUTH on every new connection.
    tls: None (plaintext), True (system CAs) or an ssl.SSLContext (own CA, client certificate).
    server_name: the name the daemon's certificate must carry; default the host of the address.
    timeout: seconds a reply may take beyond the request's WAIT before the daemon counts as hung:
    the connection is then closed like a failed one (None: wait for ever).
    """

    def __init__(self, addresses: Union[str, Iterable[str]], *, secret: Optional[str] = None,
                 tls: Union[None, bool, ssl.SSLContext] = None, server_name: Optional[str] = None,
                 connect_timeout: float = 5.0, timeout: Optional[float] = 10.0):
        if isinstance(addresses, str):
            addresses = addresses.split(",")
        self._addresses = [proto.parse_address(a) for a in addresses]
        if not self._addresses:
            raise ValueError("at least one address is needed")
        self._secret = proto.token(secret, "secret") if secret is not None else None
        self._timeout = timeout
        if tls is True:
            tls = ssl.create_default_context()
        self._tls = tls or None
        self._server_name = server_name
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._conn: Optional[_Conn] = None
        self._index = 0
        self._closed = False

    # -- connections

    @property
    def address(self) -> Optional[str]:
        """The daemon the current connection goes to, None when not connected."""
        conn = self._conn
        return conn.address if conn is not None and not conn.closed else None

    def _connection(self) -> _Conn:
        with self._lock:
            if self._closed:
                raise Unavailable("the client is closed")
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn
            if conn is not None:  # it failed: fail over to the next address
                self._index = (self._index + 1) % len(self._addresses)
                self._conn = None
            problems = []
            for i in range(len(self._addresses)):
                index = (self._index + i) % len(self._addresses)
                host, port = self._addresses[index]
                try:
                    conn = self._open(host, port)
                except AuthError:
                    raise
                except (OSError, RedlockdError) as error:
                    problems.append(f"{host}:{port}: {error}")
                    continue
                self._index, self._conn = index, conn
                return conn
            raise Unavailable("no redlockd reachable: " + "; ".join(problems))

    def _open(self, host: str, port: int) -> _Conn:
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        sock = socket.create_connection((host, port), timeout=self._connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._server_name or host)
        except BaseException:
            sock.close()
            raise
        conn = _Conn(sock, address, self._closed_conn, self._timeout)
        try:
            # AUTH and HELLO in one write: requests are checked in order, so this works.
            auth = _Pending(f"AUTH {self._secret}") if self._secret is not None else None
            hello = _Pending("HELLO")
            if auth is not None:
                conn.send(auth)
            conn.send(hello)
            for p in (auth, hello):
                if p is None:
                    continue
                if not p.done.wait(self._connect_timeout):
                    raise TimeoutError(f"no answer to {p.line.split()[0]} within "
                                       f"{self._connect_timeout} s")
                if p.error is not None:
                    raise p.error
            if auth is not None:
                proto.parse_ok(auth.reply)
            proto.check_protocol(proto.parse_hello(hello.reply))
        except BaseException:
            conn.close()
            raise
        return conn

    def _closed_conn(self, conn: _Conn) -> None:
        pass  # _connection() notices conn.closed and fails over on the next call

    def close(self) -> None:
        """Closes the connection; the daemon then releases this client's KEEP locks."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests

    def _call(self, pending: _Pending) -> tuple[str, _Conn]:
        conn = self._connection()
        try:
            conn.send(pending)
        except ConnectionLost:
            # It died just before: this request never left, so it may go to the next daemon.
            conn = self._connection()
            conn.send(pending)
        try:
            pending.done.wait()
        except BaseException:
            pending.abandon(conn)
            raise
        if pending.error is not None:
            raise pending.error
        return pending.reply, conn

    def acquire(self, resource: str, ttl: float, *, wait: Optional[float] = None,
                keep: bool = False, on_lost: Optional[Callable[[Lease], None]] = None) -> Lease:
        """LOCK. ttl and wait in seconds. Raises LockBusy, NoQuorum or ServerError.

        keep=True binds the lock to the connection: the daemon renews it while the connection is
        open. If it cannot (LOST), or the connection fails, lease.lost is set and on_lost(lease)
        is called on a separate thread."""
        line = proto.lock_request(resource, ttl, wait, keep)
        if on_lost is not None and not keep:
            raise ValueError("on_lost needs keep=True: a plain lease ends by its TTL")
        pending = _Pending(line, resource=resource, keep=keep, is_lock=True, wait=wait or 0.0)
        reply, conn = self._call(pending)
        grant = proto.parse_grant(reply, resource)
        return Lease(self, resource, grant.owner, grant.fence, grant.validity, keep,
                     pending.state, conn if keep else None, on_lost)

    def lock(self, resource: str, ttl: float, *, wait: Optional[float] = None, keep: bool = False,
             on_lost: Optional[Callable[[Lease], None]] = None) -> Lease:
        """acquire() for a `with` block: the lock is released when the block ends."""
        return self.acquire(resource, ttl, wait=wait, keep=keep, on_lost=on_lost)

    def unlock(self, resource: str, owner: str) -> None:
        reply, _ = self._call(_Pending(proto.unlock_request(resource, owner)))
        proto.parse_ok(reply, resource)

    def extend(self, resource: str, owner: str, ttl: float) -> float:
        """EXTEND to ttl seconds from now; returns the validity in seconds."""
        reply, _ = self._call(_Pending(proto.extend_request(resource, owner, ttl)))
        return proto.parse_validity(reply, resource)

    def status(self, resource: str) -> Status:
        """STATUS: whether a LOCK now would be refused, read from the masters (never the owner).
        Raises NoQuorum when too few masters answered to say."""
        reply, _ = self._call(_Pending(proto.status_request(resource)))
        return proto.parse_status(reply, resource)

    def ping(self) -> None:
        reply, _ = self._call(_Pending("PING"))
        proto.parse_pong(reply)

    def hello(self) -> str:
        """HELLO: "redlockd <version> proto=1 nodes=N quorum=Q"."""
        reply, _ = self._call(_Pending("HELLO"))
        return proto.parse_hello(reply)

    def info(self) -> dict:
        reply, _ = self._call(_Pending("INFO"))
        return proto.parse_info(reply)
