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
    Kind,
    LockBusy,
    LockLost,
    NoQuorum,
    NotHeld,
    RedlockdError,
    ServerError,
    Status,
    Unavailable,
)

__all__ = ["Client", "Lease", "RLock"]


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
                 "abandoned", "_lock", "wait", "deadline", "release")

    def __init__(self, line: str, resource: str = "", keep: bool = False, is_lock: bool = False,
                 wait: float = 0.0, release: str = ""):
        self.line = line
        # What releases a grant of this LOCK or MLOCK, without the owner ("UNLOCK r", "MUNLOCK
        # n r1 .. rn"); `resource` is the one a LOST push names (a set's first).
        self.release = release or f"UNLOCK {resource}"
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
            conn.send_nowait(f"{self.release} {owner}")


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
    """A lock held through redlockd: an exclusive lock, a shared hold, a permit of a semaphore or
    a set of resources (`kind`). Use it as a context manager, or call release()."""

    def __init__(self, client: "Client", resource: str, owner: str, fence: int, validity: float,
                 keep: bool, state: Optional[_KeepState], conn: Optional[_Conn],
                 on_lost: Optional[Callable[["Lease"], None]], *, kind: str = Kind.EXCLUSIVE,
                 resources: Optional[tuple[str, ...]] = None, permits: Optional[int] = None,
                 ttl: float = 0.0):
        self.resource = resource  # for a set, the first resource its MLOCK named
        self.resources = resources or (resource,)  # every resource held (a set's, in order)
        self.kind = kind  # Kind.EXCLUSIVE, SHARED, PERMIT or SET
        self.permits = permits  # PERMIT: the n of the semaphore
        self.owner = owner  # the capability to unlock or extend: treat it like a password
        self.fence = fence  # pass it to the storage, which must refuse smaller ones
        self.validity = validity  # seconds the lock was guaranteed when the reply was written
        self.ttl = ttl  # seconds: the TTL the masters last set (LOCK or extend())
        self.keep = keep
        self.expires_at = time.monotonic() + validity  # monotonic; a lower bound of the truth
        self._client = client
        self._state = state
        self._conn = conn
        self._released = False
        self._reason = ""
        # Set when a KEEP lock is lost (LOST pushed, or its connection failed), or when a
        # re-entry of an RLock found the lock no longer held. A plain lease is otherwise never
        # "lost" this way: it ends by its TTL; watch `expires_at`.
        self.lost = state.lost if state is not None else threading.Event()
        if state is not None and on_lost is not None:
            state.add_callback(lambda: on_lost(self))

    @property
    def slot(self) -> Optional[int]:
        """PERMIT: which of the semaphore's slots this permit holds (the owner says it)."""
        return int(self.owner[5:8], 16) if self.kind == Kind.PERMIT else None

    @property
    def lost_reason(self) -> str:
        return self._state.reason if self._state is not None else self._reason

    def _mark_lost(self, reason: str) -> None:
        if self._state is not None:
            if self._conn is not None:
                self._conn.forget_keep(self.owner)
            self._state.mark_lost(reason)
        elif not self.lost.is_set():
            self._reason = reason
            self.lost.set()

    def remaining(self) -> float:
        """Seconds of guaranteed validity left (0 when lost)."""
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.expires_at - time.monotonic())

    def extend(self, ttl: float) -> float:
        """EXTEND (MEXTEND for a set) to `ttl` seconds from now; returns the new validity in
        seconds."""
        if self.kind == Kind.SET:
            validity = self._client.extend_many(self.resources, self.owner, ttl)
        else:
            validity = self._client.extend(self.resource, self.owner, ttl)
        self.validity, self.ttl = validity, ttl
        self.expires_at = time.monotonic() + validity
        return validity

    def release(self) -> None:
        """UNLOCK (MUNLOCK for a set). Raises NotHeld if the lock had already expired (unless it
        was reported lost)."""
        if self._released:
            return
        self._released = True
        if self._conn is not None:
            self._conn.forget_keep(self.owner)
        try:
            if self.kind == Kind.SET:
                self._client.unlock_many(self.resources, self.owner)
            else:
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
        what = (f"resources={list(self.resources)!r}" if self.kind == Kind.SET
                else f"resource={self.resource!r}")
        return (f"Lease({what}, kind={self.kind!r}, fence={self.fence}, keep={self.keep}, "
                f"lost={self.lost.is_set()})")


class _Hold:
    """One thread's (or task's) holding of a reentrant lock: the lease and how many holds."""

    __slots__ = ("lease", "count")

    def __init__(self, lease):
        self.lease = lease
        self.count = 1


def reentry_extension(lease, ttl: float, margin: Optional[float]) -> Optional[float]:
    """The TTL a re-entry must EXTEND a plain lease to, or None when it is left alone.

    Never shortens: the TTL sent is at least the one the masters last set, and every master's
    remaining TTL is below that. Only when the validity left is below the margin (default a third
    of that TTL) and below the TTL sent, so that the lease then lasts at least `ttl`."""
    if lease.keep:
        return None  # renewed by the daemon
    target = max(ttl, lease.ttl)
    left = lease.remaining()
    limit = target / 3.0 if margin is None else margin
    return target if left < limit and left < target else None


def lost_on_reentry(lease, error: Optional[BaseException] = None) -> LockLost:
    what = " ".join(lease.resources)
    if error is None:
        return LockLost(f"the lock on {what} held by this thread or task was lost: "
                        f"{lease.lost_reason or 'lost'}")
    return LockLost(f"re-entering the lock on {what}: it is no longer held ({error})")


class RLock:
    """A reentrant lock of redlockd, per thread, like threading.RLock: `with lock as lease:`.

    The hold count lives in the client, never on the masters. The first acquire() of a thread
    sends LOCK (MLOCK for several resources), waiting in the daemon's queue; a re-entry by the
    same thread on the same resource(s) and kind returns the same lease (same owner and fence)
    and only counts. A re-entry of a plain lease with less than `margin` validity left (default
    a third of the TTL) sends EXTEND, never LOCK, to the larger of the re-entry's TTL and the one
    the masters last set, so it never shortens the lease; if the lock is gone (NOTHELD,
    NOQUORUM, a KEEP lock reported lost) the re-entry raises LockLost. Only the last release()
    sends UNLOCK. Every RLock of one client on the same resource(s) and kind is the same lock.
    """

    _wait_round = 60.0  # the longest single WAIT; acquire() sends the next when one runs out

    def __init__(self, client: "Client", resources: tuple[str, ...], kind: str, ttl: float, *,
                 keep: bool = False, permits: Optional[int] = None, label: Optional[str] = None,
                 max_hold: Optional[float] = None,
                 on_lost: Optional[Callable[[Lease], None]] = None,
                 margin: Optional[float] = None):
        proto.ms(ttl, "ttl")
        if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float))
                                   or margin < 0):
            raise ValueError(f"margin must be a number of seconds >= 0, not {margin!r}")
        self._client = client
        self.resources = resources
        self.kind = kind
        self.ttl = ttl
        self._options = dict(keep=keep, label=label, max_hold=max_hold, on_lost=on_lost)
        if kind == Kind.SET:
            self._key: tuple = (kind, frozenset(resources))
        else:
            self._options.update(shared=kind == Kind.SHARED, permits=permits)
            self._key = (kind, resources[0], permits)
        self._margin = margin

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Takes or re-enters the lock. blocking=False: one try (WAIT 0); timeout: seconds to
        wait in the daemon's queue; -1: until held. False when the wait ran out. Raises LockLost
        for a re-entry into a lock that was lost, NoQuorum, ServerError, ConnectionError."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout must be -1 or at least 0")
        holds = self._client._holds()
        hold = holds.get(self._key)
        if hold is not None:
            self._reenter(hold)
            return True
        forever = blocking and timeout == -1
        deadline = time.monotonic() + (0.0 if not blocking else max(0.0, timeout))
        while True:
            wait = self._wait_round
            if not forever:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                lease = self._take(wait)
            except LockBusy:
                if not forever and time.monotonic() >= deadline:
                    return False
                continue
            except ServerError as error:
                # A daemon whose max_ttl_ms is below the round: the TTL is a WAIT it accepts.
                if error.code != "BAD_TTL" or wait <= self.ttl:
                    raise
                self._wait_round = self.ttl
                continue
            holds[self._key] = _Hold(lease)
            return True

    def _take(self, wait: float) -> Lease:
        if self.kind == Kind.SET:
            return self._client.acquire_many(self.resources, self.ttl, wait=wait, **self._options)
        return self._client.acquire(self.resources[0], self.ttl, wait=wait, **self._options)

    def _reenter(self, hold: _Hold) -> None:
        lease = hold.lease
        if lease.lost.is_set():
            raise lost_on_reentry(lease)
        ttl = reentry_extension(lease, self.ttl, self._margin)
        if ttl is not None:
            try:
                lease.extend(ttl)
            except (NotHeld, NoQuorum) as error:
                lost = lost_on_reentry(lease, error)
                lease._mark_lost(str(lost))
                raise lost from error
        hold.count += 1

    def release(self) -> None:
        """Ends one hold of this thread; the last one sends UNLOCK (MUNLOCK). RuntimeError when
        the thread holds none; NotHeld when the lock had run out (unless reported lost)."""
        holds = self._client._holds()
        hold = holds.get(self._key)
        if hold is None:
            raise RuntimeError("cannot release un-acquired lock")
        hold.count -= 1
        if hold.count > 0:
            return
        del holds[self._key]
        hold.lease.release()

    @property
    def lease(self) -> Lease:
        """This thread's lease (RuntimeError when it holds none): its fence and validity."""
        hold = self._client._holds().get(self._key)
        if hold is None:
            raise RuntimeError("this thread does not hold the lock")
        return hold.lease

    @property
    def count(self) -> int:
        """How many holds this thread has (0: none)."""
        hold = self._client._holds().get(self._key)
        return 0 if hold is None else hold.count

    def __enter__(self) -> Lease:
        self.acquire()
        return self.lease

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.release()
        except RedlockdError:
            if exc_type is None:
                raise  # else the block's own exception is the one worth seeing

    def __repr__(self) -> str:
        return (f"RLock({' '.join(self.resources)!r}, kind={self.kind!r}, ttl={self.ttl}, "
                f"held here={self.count})")


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
        self._local = threading.local()  # per thread: the holds of its RLocks

    def _holds(self) -> dict:
        holds = getattr(self._local, "holds", None)
        if holds is None:
            holds = self._local.holds = {}
        return holds

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

    def _grant(self, line: str, resources: tuple[str, ...], kind: str, ttl: float,
               wait: Optional[float], keep: bool, on_lost: Optional[Callable[[Lease], None]],
               permits: Optional[int] = None) -> Lease:
        if on_lost is not None and not keep:
            raise ValueError("on_lost needs keep=True: a plain lease ends by its TTL")
        pending = _Pending(line, resource=resources[0], keep=keep, is_lock=True,
                           wait=wait or 0.0,
                           release=proto.release_prefix(resources, kind == Kind.SET))
        reply, conn = self._call(pending)
        grant = proto.parse_grant(reply, resources[0])
        return Lease(self, resources[0], grant.owner, grant.fence, grant.validity, keep,
                     pending.state, conn if keep else None, on_lost, kind=kind,
                     resources=resources, permits=permits, ttl=ttl)

    def acquire(self, resource: str, ttl: float, *, wait: Optional[float] = None,
                keep: bool = False, on_lost: Optional[Callable[[Lease], None]] = None,
                shared: bool = False, permits: Optional[int] = None,
                label: Optional[str] = None, max_hold: Optional[float] = None) -> Lease:
        """LOCK. ttl, wait and max_hold in seconds. Raises LockBusy, NoQuorum, PermitsMismatch
        or ServerError.

        keep=True binds the lock to the connection: the daemon renews it while the connection is
        open (for at most max_hold). If it cannot (LOST), or the connection fails, lease.lost is
        set and on_lost(lease) is called on a separate thread. shared=True takes a shared (read)
        hold: any number of them at once, none while an exclusive lock is held or a writer
        waits. permits=n takes one of n permits of the semaphore `resource` (a semaphore and a
        lock of the same name are different things). label names the holder for STATUS and
        LIST (1 to 64 printable characters)."""
        line = proto.lock_request(resource, ttl, wait, keep, shared=shared, permits=permits,
                                  label=label, max_hold=max_hold)
        return self._grant(line, (resource,), proto.kind_of(shared, permits), ttl, wait, keep,
                           on_lost, permits)

    def lock(self, resource: str, ttl: float, *, wait: Optional[float] = None, keep: bool = False,
             on_lost: Optional[Callable[[Lease], None]] = None, shared: bool = False,
             permits: Optional[int] = None, label: Optional[str] = None,
             max_hold: Optional[float] = None) -> Lease:
        """acquire() for a `with` block: the lock is released when the block ends."""
        return self.acquire(resource, ttl, wait=wait, keep=keep, on_lost=on_lost, shared=shared,
                            permits=permits, label=label, max_hold=max_hold)

    def semaphore(self, resource: str, permits: int, ttl: float, *,
                  wait: Optional[float] = None, keep: bool = False,
                  on_lost: Optional[Callable[[Lease], None]] = None, label: Optional[str] = None,
                  max_hold: Optional[float] = None) -> Lease:
        """One permit of the semaphore `resource` of `permits` permits (LOCK ... PERMITS n):
        `with client.semaphore("pool", 3, ttl=10.0) as permit:`. Raises LockBusy while all are
        held, PermitsMismatch when the permits in use were taken with another n."""
        return self.acquire(resource, ttl, wait=wait, keep=keep, on_lost=on_lost,
                            permits=permits, label=label, max_hold=max_hold)

    def acquire_many(self, resources: Iterable[str], ttl: float, *,
                     wait: Optional[float] = None, keep: bool = False,
                     on_lost: Optional[Callable[[Lease], None]] = None,
                     label: Optional[str] = None, max_hold: Optional[float] = None) -> Lease:
        """MLOCK: every resource at once or none (no deadlock, whatever the order), one owner and
        one fence for the set; each resource named once. The lease releases and extends them
        all; a LOST names the first. Raises as acquire()."""
        names = proto.resource_list(resources)
        line = proto.mlock_request(names, ttl, wait, keep, label=label, max_hold=max_hold)
        return self._grant(line, names, Kind.SET, ttl, wait, keep, on_lost)

    def lock_many(self, resources: Iterable[str], ttl: float, *, wait: Optional[float] = None,
                  keep: bool = False, on_lost: Optional[Callable[[Lease], None]] = None,
                  label: Optional[str] = None, max_hold: Optional[float] = None) -> Lease:
        """acquire_many() for a `with` block: the set is released when the block ends."""
        return self.acquire_many(resources, ttl, wait=wait, keep=keep, on_lost=on_lost,
                                 label=label, max_hold=max_hold)

    def rlock(self, resource: str, ttl: float, *, keep: bool = False, shared: bool = False,
              permits: Optional[int] = None, label: Optional[str] = None,
              max_hold: Optional[float] = None, on_lost: Optional[Callable[[Lease], None]] = None,
              margin: Optional[float] = None) -> RLock:
        """A reentrant lock (per thread) on `resource`, of the kind the options say: see RLock.
        Nothing is sent until it is acquired."""
        proto.token(resource, "resource")
        if shared and permits is not None:
            raise ValueError("a lock is shared or a permit of a semaphore, not both")
        if permits is not None:
            proto.permits_count(permits)
        return RLock(self, (resource,), proto.kind_of(shared, permits), ttl, keep=keep,
                     permits=permits, label=label, max_hold=max_hold, on_lost=on_lost,
                     margin=margin)

    def rlock_many(self, resources: Iterable[str], ttl: float, *, keep: bool = False,
                   label: Optional[str] = None, max_hold: Optional[float] = None,
                   on_lost: Optional[Callable[[Lease], None]] = None,
                   margin: Optional[float] = None) -> RLock:
        """A reentrant lock (per thread) on a set of resources (MLOCK): see RLock."""
        return RLock(self, proto.resource_list(resources), Kind.SET, ttl, keep=keep, label=label,
                     max_hold=max_hold, on_lost=on_lost, margin=margin)

    def unlock(self, resource: str, owner: str) -> None:
        """UNLOCK, for a hold of any kind (the owner says which); a set's owner releases that one
        resource of the set."""
        reply, _ = self._call(_Pending(proto.unlock_request(resource, owner)))
        proto.parse_ok(reply, resource)

    def extend(self, resource: str, owner: str, ttl: float) -> float:
        """EXTEND to ttl seconds from now, for a hold of any kind; returns the validity in
        seconds."""
        reply, _ = self._call(_Pending(proto.extend_request(resource, owner, ttl)))
        return proto.parse_validity(reply, resource)

    def unlock_many(self, resources: Iterable[str], owner: str) -> None:
        """MUNLOCK: releases these resources of a set (all of them, or fewer)."""
        line = proto.munlock_request(resources, owner)
        reply, _ = self._call(_Pending(line))
        proto.parse_ok(reply, line.split(" ")[2])

    def extend_many(self, resources: Iterable[str], owner: str, ttl: float) -> float:
        """MEXTEND: these resources of a set to ttl seconds from now; returns the validity."""
        line = proto.mextend_request(resources, owner, ttl)
        reply, _ = self._call(_Pending(line))
        return proto.parse_validity(reply, line.split(" ")[2])

    def status(self, resource: str) -> Status:
        """STATUS: whether a LOCK now would be refused, read from the masters (never the owner),
        with the shared holders and the permits in use of the semaphore of that name. Raises
        NoQuorum when too few masters answered to say."""
        reply, _ = self._call(_Pending(proto.status_request(resource)))
        return proto.parse_status(reply, resource)

    def list(self, prefix: str = "", count: Optional[int] = None) -> proto.Listing:
        """LIST: the resources held on a majority of the masters (through any daemon) whose
        names start with `prefix`, at most `count` (the daemon's default 100, at most 1000),
        with their kind, time left and labels; never an owner."""
        reply, _ = self._call(_Pending(proto.list_request(prefix, count)))
        return proto.parse_listing(reply)

    def ping(self) -> None:
        reply, _ = self._call(_Pending("PING"))
        proto.parse_pong(reply)

    def hello(self) -> str:
        """HELLO: "redlockd <version> proto=1.1 nodes=N quorum=Q" (proto=1 before the lock
        family)."""
        reply, _ = self._call(_Pending("HELLO"))
        return proto.parse_hello(reply)

    def info(self) -> dict:
        reply, _ = self._call(_Pending("INFO"))
        return proto.parse_info(reply)
