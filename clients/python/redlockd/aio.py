"""The asyncio variant of the redlockd client: the same shapes, awaited.

    import redlockd.aio
    client = redlockd.aio.Client(["127.0.0.1:7400", "127.0.0.1:7410"])
    async with client.lock("orders:1", ttl=10.0, wait=5.0) as lease:
        await write_with_fence(lease.fence)

The lock family as in `redlockd`: `client.lock(r, ttl=..., shared=True)`, `client.semaphore(r, n,
ttl=...)`, `client.lock_many([r1, r2], ttl=...)`, each `async with`; `client.rlock(r, ttl=...)` is
reentrant per asyncio task.

One connection per client, pipelined: replies are matched to requests by order, LOST pushes are
recognised between them. Cancelling a call (task.cancel(), asyncio.wait_for) abandons it: its
reply is still read in turn, and a lock it grants is released at once. Errors are those of
`redlockd`.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import ssl
import time
import weakref
from typing import Callable, Iterable, Optional, Union

from . import _protocol as proto
from ._client import _Hold, lost_on_reentry, reentry_extension
from ._protocol import (
    AuthError,
    ConnectionLost,
    Kind,
    LockBusy,
    NoQuorum,
    NotHeld,
    RedlockdError,
    ServerError,
    Status,
    Unavailable,
)

__all__ = ["Client", "Lease", "RLock"]


class _Keep:
    def __init__(self, resource: str, owner: str):
        self.resource = resource
        self.owner = owner
        self.lost = asyncio.Event()
        self.reason = ""
        self.callbacks: list[Callable[[], None]] = []

    def mark_lost(self, reason: str) -> None:
        if self.lost.is_set():
            return
        self.reason = reason
        self.lost.set()
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            asyncio.get_running_loop().call_soon(callback)


class _Entry:
    __slots__ = ("line", "resource", "keep", "is_lock", "future", "state", "wait", "deadline",
                 "release")

    def __init__(self, line: str, resource: str = "", keep: bool = False, is_lock: bool = False,
                 wait: float = 0.0, release: str = ""):
        self.line = line
        # What releases a grant of this LOCK or MLOCK, without the owner; `resource` is the one
        # a LOST push names (a set's first).
        self.release = release or f"UNLOCK {resource}"
        self.wait = wait
        self.deadline = 0.0
        self.resource = resource
        self.keep = keep
        self.is_lock = is_lock
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.state: Optional[_Keep] = None


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str,
                 timeout: Optional[float] = None):
        self.address = address
        self.timeout = timeout
        self.head_deadline = 0.0
        self.timer: Optional[asyncio.TimerHandle] = None
        self.hung = False
        self.reader = reader
        self.writer = writer
        self.pending: collections.deque[_Entry] = collections.deque()
        self.keeps: dict[str, _Keep] = {}
        self.closed = False
        self.task = asyncio.get_running_loop().create_task(self._read())

    def send(self, entry: _Entry) -> bool:
        if self.closed:
            return False
        if self.timeout is not None:
            loop = asyncio.get_running_loop()
            entry.deadline = loop.time() + self.timeout + entry.wait
            if not self.pending:
                self._time_head(entry.deadline)
        self.pending.append(entry)  # one thread: append and write are never interleaved
        self.writer.write(entry.line.encode("ascii") + b"\n")
        return True

    def close(self) -> None:
        self.writer.close()

    def _time_head(self, deadline: float) -> None:
        """Only the head of the queue can be late: the others' replies come after it."""
        self.head_deadline = deadline
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_at(deadline, self._check)

    def _check(self) -> None:
        self.timer = None
        if self.closed or not self.pending:
            return
        if asyncio.get_running_loop().time() < self.head_deadline:
            self.timer = asyncio.get_running_loop().call_at(self.head_deadline, self._check)
            return
        self.hung = True
        self.writer.transport.abort()  # the reader ends and fails everything in flight

    async def _read(self) -> None:
        reason: BaseException = ConnectionLost(f"{self.address} closed the connection")
        try:
            while True:
                raw = await self.reader.readline()
                if not raw.endswith(b"\n"):
                    break
                self._line(raw[:-1].decode("ascii", "replace").removesuffix("\r"))
        except (OSError, ValueError, RedlockdError) as error:
            reason = ConnectionLost(f"connection to {self.address} failed: {error}")
        finally:
            self._shut(reason)

    def _line(self, line: str) -> None:
        if line.startswith("LOST "):  # a push, never a reply
            parts = line.split(" ")
            state = self.keeps.pop(parts[2], None) if len(parts) >= 3 else None
            if state is not None and state.resource == parts[1]:
                state.mark_lost("the daemon could not renew the lock (LOST)")
            return
        if not self.pending:
            raise ServerError("PROTOCOL", f"a reply with no request waiting for it: {line!r}")
        entry = self.pending.popleft()
        if self.pending and self.timeout is not None:
            now = asyncio.get_running_loop().time()
            self._time_head(max(self.pending[0].deadline, now + self.timeout))
        if entry.keep and line.startswith("OK "):
            entry.state = _Keep(entry.resource, line.split(" ")[1])
            self.keeps[entry.state.owner] = entry.state
        if entry.future.cancelled():
            # The caller gave up; the reply came in its turn. Release what it granted.
            if entry.is_lock and line.startswith("OK "):
                owner = line.split(" ")[1]
                self.keeps.pop(owner, None)
                unlock = _Entry(f"{entry.release} {owner}")
                unlock.future.add_done_callback(lambda f: f.cancelled() or f.exception())
                self.send(unlock)
            return
        entry.future.set_result(line)

    def _shut(self, reason: BaseException) -> None:
        if self.hung:
            reason = ConnectionLost(f"no reply from {self.address} within {self.timeout:g} s: "
                                    f"daemon hung?")
        if self.timer is not None:
            self.timer.cancel()
        self.closed = True
        self.writer.close()
        pending, self.pending = list(self.pending), collections.deque()
        keeps, self.keeps = list(self.keeps.values()), {}
        for state in keeps:  # first: a caller that sees its call fail finds them lost already
            state.mark_lost(f"connection to {self.address} lost: {reason}")
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(reason)


class Lease:
    """A lock held through redlockd (any kind: `kind`, as redlockd.Lease); `async with`
    releases it, as does `await release()`."""

    def __init__(self, client: "Client", resource: str, owner: str, fence: int, validity: float,
                 keep: bool, state: Optional[_Keep], conn: Optional[_Conn],
                 on_lost: Optional[Callable[["Lease"], object]], *, kind: str = Kind.EXCLUSIVE,
                 resources: Optional[tuple[str, ...]] = None, permits: Optional[int] = None,
                 ttl: float = 0.0):
        self.resource = resource
        self.resources = resources or (resource,)
        self.kind = kind
        self.permits = permits
        self.owner = owner
        self.fence = fence
        self.validity = validity
        self.ttl = ttl
        self.keep = keep
        self.expires_at = time.monotonic() + validity
        self._client = client
        self._state = state
        self._conn = conn
        self._released = False
        self._reason = ""
        self.lost = state.lost if state is not None else asyncio.Event()
        if state is not None and on_lost is not None:
            def call() -> None:
                result = on_lost(self)
                if inspect.isawaitable(result):
                    asyncio.ensure_future(result)
            if state.lost.is_set():
                asyncio.get_running_loop().call_soon(call)
            else:
                state.callbacks.append(call)

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
                self._conn.keeps.pop(self.owner, None)
            self._state.mark_lost(reason)
        elif not self.lost.is_set():
            self._reason = reason
            self.lost.set()

    def remaining(self) -> float:
        """Seconds of guaranteed validity left (0 when lost)."""
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.expires_at - time.monotonic())

    async def extend(self, ttl: float) -> float:
        """EXTEND (MEXTEND for a set) to `ttl` seconds from now; returns the new validity."""
        if self.kind == Kind.SET:
            validity = await self._client.extend_many(self.resources, self.owner, ttl)
        else:
            validity = await self._client.extend(self.resource, self.owner, ttl)
        self.validity, self.ttl = validity, ttl
        self.expires_at = time.monotonic() + validity
        return validity

    async def release(self) -> None:
        """UNLOCK (MUNLOCK for a set). Raises NotHeld if the lock had already expired (unless it
        was reported lost)."""
        if self._released:
            return
        self._released = True
        if self._conn is not None:
            self._conn.keeps.pop(self.owner, None)
        if self._state is not None:
            self._state.callbacks = []
        try:
            if self.kind == Kind.SET:
                await self._client.unlock_many(self.resources, self.owner)
            else:
                await self._client.unlock(self.resource, self.owner)
        except (NotHeld, ConnectionError):
            if not self.lost.is_set():
                raise

    async def __aenter__(self) -> "Lease":
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        try:
            await self.release()
        except RedlockdError:
            if exc_type is None:
                raise


    def __repr__(self) -> str:
        what = (f"resources={list(self.resources)!r}" if self.kind == Kind.SET
                else f"resource={self.resource!r}")
        return (f"Lease({what}, kind={self.kind!r}, fence={self.fence}, keep={self.keep}, "
                f"lost={self.lost.is_set()})")


class _LockContext:
    def __init__(self, acquire: Callable[[], "asyncio.Future[Lease]"]):
        self._acquire = acquire
        self._lease: Optional[Lease] = None

    async def __aenter__(self) -> Lease:
        self._lease = await self._acquire()
        return self._lease

    async def __aexit__(self, exc_type, exc, tb) -> None:
        await self._lease.__aexit__(exc_type, exc, tb)


class RLock:
    """A reentrant lock of redlockd, per asyncio task: `async with lock as lease:`.

    As redlockd.RLock, with the task in place of the thread: a re-entry by the same task on the
    same resource(s) and kind returns the same lease and only counts (EXTEND, never LOCK, when
    less than `margin` is left; LockLost when the lock is gone); only the last release() sends
    UNLOCK. A task it starts is another task: it does not hold the lock.
    """

    _wait_round = 60.0

    def __init__(self, client: "Client", resources: tuple[str, ...], kind: str, ttl: float, *,
                 keep: bool = False, permits: Optional[int] = None, label: Optional[str] = None,
                 max_hold: Optional[float] = None,
                 on_lost: Optional[Callable[[Lease], object]] = None,
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

    async def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Takes or re-enters the lock, as redlockd.RLock.acquire. Cancelling the task abandons
        the wait: a lock granted later is released at once."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout must be -1 or at least 0")
        holds = self._client._holds()
        hold = holds.get(self._key)
        if hold is not None:
            await self._reenter(hold)
            return True
        forever = blocking and timeout == -1
        deadline = time.monotonic() + (0.0 if not blocking else max(0.0, timeout))
        while True:
            wait = self._wait_round
            if not forever:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                lease = await self._take(wait)
            except LockBusy:
                if not forever and time.monotonic() >= deadline:
                    return False
                continue
            except ServerError as error:
                if error.code != "BAD_TTL" or wait <= self.ttl:
                    raise
                self._wait_round = self.ttl
                continue
            holds[self._key] = _Hold(lease)
            return True

    async def _take(self, wait: float) -> Lease:
        if self.kind == Kind.SET:
            return await self._client.acquire_many(self.resources, self.ttl, wait=wait,
                                                   **self._options)
        return await self._client.acquire(self.resources[0], self.ttl, wait=wait,
                                          **self._options)

    async def _reenter(self, hold: _Hold) -> None:
        lease = hold.lease
        if lease.lost.is_set():
            raise lost_on_reentry(lease)
        ttl = reentry_extension(lease, self.ttl, self._margin)
        if ttl is not None:
            try:
                await lease.extend(ttl)
            except (NotHeld, NoQuorum) as error:
                lost = lost_on_reentry(lease, error)
                lease._mark_lost(str(lost))
                raise lost from error
        hold.count += 1

    async def release(self) -> None:
        """Ends one hold of this task; the last one sends UNLOCK (MUNLOCK). RuntimeError when
        the task holds none; NotHeld when the lock had run out (unless reported lost)."""
        holds = self._client._holds()
        hold = holds.get(self._key)
        if hold is None:
            raise RuntimeError("cannot release un-acquired lock")
        hold.count -= 1
        if hold.count > 0:
            return
        del holds[self._key]
        await hold.lease.release()

    @property
    def lease(self) -> Lease:
        """This task's lease (RuntimeError when it holds none)."""
        hold = self._client._holds().get(self._key)
        if hold is None:
            raise RuntimeError("this task does not hold the lock")
        return hold.lease

    @property
    def count(self) -> int:
        """How many holds this task has (0: none)."""
        hold = self._client._holds().get(self._key)
        return 0 if hold is None else hold.count

    async def __aenter__(self) -> Lease:
        await self.acquire()
        return self.lease

    async def __aexit__(self, exc_type, exc, tb) -> None:
        try:
            await self.release()
        except RedlockdError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        return f"RLock({' '.join(self.resources)!r}, kind={self.kind!r}, ttl={self.ttl})"


class Client:
    """Same arguments as redlockd.Client; create and use it inside a running event loop."""

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
        self._tls = ssl.create_default_context() if tls is True else (tls or None)
        self._server_name = server_name
        self._connect_timeout = connect_timeout
        self._conn: Optional[_Conn] = None
        self._index = 0
        self._closed = False
        self._connecting: Optional[asyncio.Lock] = None
        # Per task: the holds of its RLocks (gone with the task).
        self._task_holds: "weakref.WeakKeyDictionary[asyncio.Task, dict]" = (
            weakref.WeakKeyDictionary())

    def _holds(self) -> dict:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a reentrant lock is held by an asyncio task: call it from one")
        holds = self._task_holds.get(task)
        if holds is None:
            holds = self._task_holds[task] = {}
        return holds

    @property
    def address(self) -> Optional[str]:
        return self._conn.address if self._conn is not None and not self._conn.closed else None

    async def _connection(self) -> _Conn:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._closed:
                raise Unavailable("the client is closed")
            if self._conn is not None and not self._conn.closed:
                return self._conn
            if self._conn is not None:
                self._conn = None
                self._index = (self._index + 1) % len(self._addresses)  # fail over
            problems = []
            for i in range(len(self._addresses)):
                index = (self._index + i) % len(self._addresses)
                host, port = self._addresses[index]
                try:
                    conn = await asyncio.wait_for(self._open(host, port), self._connect_timeout)
                except AuthError:
                    raise
                except (OSError, RedlockdError, asyncio.TimeoutError) as error:
                    problems.append(f"{host}:{port}: {error!r}")
                    continue
                self._index, self._conn = index, conn
                return conn
            raise Unavailable("no redlockd reachable: " + "; ".join(problems))

    async def _open(self, host: str, port: int) -> _Conn:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=self._tls, limit=1 << 20,
            server_hostname=(self._server_name or host) if self._tls else None)
        conn = _Conn(reader, writer, f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                     self._timeout)
        try:
            # AUTH and HELLO in one write: requests are checked in order, so this works.
            auth = _Entry(f"AUTH {self._secret}") if self._secret is not None else None
            hello = _Entry("HELLO")
            if auth is not None:
                conn.send(auth)
            conn.send(hello)
            if auth is not None:
                proto.parse_ok(await auth.future)
            proto.check_protocol(proto.parse_hello(await hello.future))
        except BaseException:
            conn.close()
            raise
        return conn

    async def _call(self, entry: _Entry) -> tuple[str, _Conn]:
        conn = await self._connection()
        if not conn.send(entry):
            conn = await self._connection()  # it died just before: the request never left
            if not conn.send(entry):
                raise ConnectionLost(f"connection to {conn.address} is closed")
        return await entry.future, conn

    async def _grant(self, line: str, resources: tuple[str, ...], kind: str, ttl: float,
                     wait: Optional[float], keep: bool,
                     on_lost: Optional[Callable[[Lease], object]],
                     permits: Optional[int] = None) -> Lease:
        if on_lost is not None and not keep:
            raise ValueError("on_lost needs keep=True: a plain lease ends by its TTL")
        entry = _Entry(line, resources[0], keep, is_lock=True, wait=wait or 0.0,
                       release=proto.release_prefix(resources, kind == Kind.SET))
        reply, conn = await self._call(entry)
        grant = proto.parse_grant(reply, resources[0])
        return Lease(self, resources[0], grant.owner, grant.fence, grant.validity, keep,
                     entry.state, conn if keep else None, on_lost, kind=kind,
                     resources=resources, permits=permits, ttl=ttl)

    async def acquire(self, resource: str, ttl: float, *, wait: Optional[float] = None,
                      keep: bool = False, on_lost: Optional[Callable[[Lease], object]] = None,
                      shared: bool = False, permits: Optional[int] = None,
                      label: Optional[str] = None, max_hold: Optional[float] = None) -> Lease:
        """LOCK, as redlockd.Client.acquire (shared, permits, label, max_hold); on_lost may be a
        coroutine function."""
        line = proto.lock_request(resource, ttl, wait, keep, shared=shared, permits=permits,
                                  label=label, max_hold=max_hold)
        return await self._grant(line, (resource,), proto.kind_of(shared, permits), ttl, wait,
                                 keep, on_lost, permits)

    def lock(self, resource: str, ttl: float, **kwargs) -> _LockContext:
        """`async with client.lock(...) as lease:` acquires, and releases when the block ends."""
        return _LockContext(lambda: self.acquire(resource, ttl, **kwargs))

    def semaphore(self, resource: str, permits: int, ttl: float, **kwargs) -> _LockContext:
        """`async with client.semaphore("pool", 3, ttl=10.0) as permit:` one of `permits`
        permits of the semaphore `resource`, as redlockd.Client.semaphore."""
        return _LockContext(lambda: self.acquire(resource, ttl, permits=permits, **kwargs))

    async def acquire_many(self, resources: Iterable[str], ttl: float, *,
                           wait: Optional[float] = None, keep: bool = False,
                           on_lost: Optional[Callable[[Lease], object]] = None,
                           label: Optional[str] = None,
                           max_hold: Optional[float] = None) -> Lease:
        """MLOCK, as redlockd.Client.acquire_many: every resource at once or none."""
        names = proto.resource_list(resources)
        line = proto.mlock_request(names, ttl, wait, keep, label=label, max_hold=max_hold)
        return await self._grant(line, names, Kind.SET, ttl, wait, keep, on_lost)

    def lock_many(self, resources: Iterable[str], ttl: float, **kwargs) -> _LockContext:
        """`async with client.lock_many([r1, r2], ttl=...) as lease:` (MLOCK ... MUNLOCK)."""
        return _LockContext(lambda: self.acquire_many(resources, ttl, **kwargs))

    def rlock(self, resource: str, ttl: float, *, keep: bool = False, shared: bool = False,
              permits: Optional[int] = None, label: Optional[str] = None,
              max_hold: Optional[float] = None,
              on_lost: Optional[Callable[[Lease], object]] = None,
              margin: Optional[float] = None) -> RLock:
        """A reentrant lock (per task) on `resource`: see RLock. Nothing is sent until it is
        acquired."""
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
                   on_lost: Optional[Callable[[Lease], object]] = None,
                   margin: Optional[float] = None) -> RLock:
        """A reentrant lock (per task) on a set of resources (MLOCK): see RLock."""
        return RLock(self, proto.resource_list(resources), Kind.SET, ttl, keep=keep, label=label,
                     max_hold=max_hold, on_lost=on_lost, margin=margin)

    async def unlock(self, resource: str, owner: str) -> None:
        """UNLOCK, for a hold of any kind."""
        reply, _ = await self._call(_Entry(proto.unlock_request(resource, owner)))
        proto.parse_ok(reply, resource)

    async def extend(self, resource: str, owner: str, ttl: float) -> float:
        """EXTEND to ttl seconds from now, for a hold of any kind; returns the validity."""
        reply, _ = await self._call(_Entry(proto.extend_request(resource, owner, ttl)))
        return proto.parse_validity(reply, resource)

    async def unlock_many(self, resources: Iterable[str], owner: str) -> None:
        """MUNLOCK: releases these resources of a set."""
        line = proto.munlock_request(resources, owner)
        reply, _ = await self._call(_Entry(line))
        proto.parse_ok(reply, line.split(" ")[2])

    async def extend_many(self, resources: Iterable[str], owner: str, ttl: float) -> float:
        """MEXTEND: these resources of a set to ttl seconds from now; returns the validity."""
        line = proto.mextend_request(resources, owner, ttl)
        reply, _ = await self._call(_Entry(line))
        return proto.parse_validity(reply, line.split(" ")[2])

    async def status(self, resource: str) -> Status:
        """STATUS, as redlockd.Client.status."""
        reply, _ = await self._call(_Entry(proto.status_request(resource)))
        return proto.parse_status(reply, resource)

    async def list(self, prefix: str = "", count: Optional[int] = None) -> proto.Listing:
        """LIST, as redlockd.Client.list."""
        reply, _ = await self._call(_Entry(proto.list_request(prefix, count)))
        return proto.parse_listing(reply)

    async def ping(self) -> None:
        reply, _ = await self._call(_Entry("PING"))
        proto.parse_pong(reply)

    async def hello(self) -> str:
        """HELLO: "redlockd <version> proto=1.1 nodes=N quorum=Q" (proto=1 before the lock
        family)."""
        reply, _ = await self._call(_Entry("HELLO"))
        return proto.parse_hello(reply)

    async def info(self) -> dict:
        reply, _ = await self._call(_Entry("INFO"))
        return proto.parse_info(reply)

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            await asyncio.gather(conn.task, return_exceptions=True)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
