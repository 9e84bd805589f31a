"""What both clients (threads and asyncio) share: the errors, the checks on arguments, each
request's line and the reading of its reply. No I/O here: a new request kind is one builder and
one parser, used by both clients."""

from __future__ import annotations

import json
from typing import Iterable, List, NamedTuple, Optional

__all__ = [
    "AuthError",
    "ConnectionLost",
    "ListedLock",
    "Listing",
    "LockBusy",
    "LockLost",
    "NoQuorum",
    "NotHeld",
    "PermitsMismatch",
    "RedlockdError",
    "ServerError",
    "Status",
    "Unavailable",
]


# ----------------------------------------------------------------------------------------------
# Errors


class RedlockdError(Exception):
    """Base class of every error this module raises for a daemon's answer or a failed connection."""


class LockBusy(RedlockdError):
    """`BUSY`: someone else holds the lock (after the wait ran out, if there was one)."""

    def __init__(self, retry_after: float):
        super().__init__(f"lock is held by someone else (retry after {retry_after:.3f} s)")
        self.retry_after = retry_after  # seconds: the smallest remaining TTL the masters reported


class NoQuorum(RedlockdError):
    """`NOQUORUM`: too few masters took part. Nothing of the attempt is left locked."""

    def __init__(self, granted: int, needed: int):
        super().__init__(f"no quorum: {granted} master(s) granted, {needed} needed")
        self.granted = granted
        self.needed = needed


class NotHeld(RedlockdError):
    """`NOTHELD`: UNLOCK or EXTEND of a lock this owner no longer holds on a majority."""

    def __init__(self, resource: str = ""):
        super().__init__(f"lock {resource!r} is not held by this owner" if resource else "not held")
        self.resource = resource


class ServerError(RedlockdError):
    """`ERR <CODE> <message>`: the request was refused and changed nothing."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code} {message}".strip())
        self.code = code
        self.message = message


class AuthError(ServerError):
    """`ERR NOAUTH` or `ERR AUTH_FAILED`: no secret, or the wrong one."""


class PermitsMismatch(ServerError):
    """`ERR PERMITS_MISMATCH`: the semaphore has permits in use under another number of permits
    (every request for one semaphore names the same n while any of its permits lives)."""


class LockLost(RedlockdError):
    """A lock this holder relied on is gone: a re-entry of a reentrant lock found it no longer
    held (its EXTEND answered NOTHELD or NOQUORUM), or its KEEP lock had been reported lost. A
    re-entry never takes the lock anew: someone else may have held it in between."""


class ConnectionLost(RedlockdError, ConnectionError):
    """The connection failed while this call was in flight; its outcome is unknown.

    A LOCK in flight may have been granted: a plain lease then ends by its TTL, a KEEP lock is
    released by the daemon when it sees the connection close."""


class Unavailable(RedlockdError, ConnectionError):
    """No daemon of the address list could be reached (or none completed the handshake)."""


def error_from_reply(reply: str, resource: str = "") -> RedlockdError:
    parts = reply.split(" ")
    status = parts[0]
    try:
        if status == "BUSY":
            return LockBusy(int(parts[1]) / 1000.0)
        if status == "NOQUORUM":
            return NoQuorum(int(parts[1]), int(parts[2]))
    except (IndexError, ValueError):
        pass
    if status == "NOTHELD":
        return NotHeld(resource)
    if status == "ERR" and len(parts) >= 2:
        code, message = parts[1], " ".join(parts[2:])
        if code in ("NOAUTH", "AUTH_FAILED"):
            return AuthError(code, message)
        if code == "PERMITS_MISMATCH":
            return PermitsMismatch(code, message)
        return ServerError(code, message)
    return ServerError("PROTOCOL", f"unexpected reply {reply!r}")


# ----------------------------------------------------------------------------------------------
# Arguments


def token(value: str, what: str) -> str:
    """A protocol argument: 1-256 printable ASCII bytes without spaces (no line injection)."""
    if not isinstance(value, str) or not 1 <= len(value) <= 256:
        raise ValueError(f"{what} must be a string of 1 to 256 characters")
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in value):
        raise ValueError(f"{what} must be printable ASCII without spaces: {value!r}")
    return value


def label_token(value: str) -> str:
    """A LABEL: 1 to 64 printable ASCII bytes without spaces."""
    if not isinstance(value, str) or not 1 <= len(value) <= 64:
        raise ValueError("label must be a string of 1 to 64 characters")
    return token(value, "label")


def permits_count(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"permits must be an int of at least 1, not {value!r}")
    return value


def resource_list(resources: Iterable[str]) -> tuple[str, ...]:
    """MLOCK's resources: at least one, each named once, in the caller's order."""
    if isinstance(resources, str):
        raise TypeError("resources must be a list of resource names, not one string")
    names = tuple(token(r, "resource") for r in resources)
    if not names:
        raise ValueError("at least one resource is needed")
    if len(set(names)) != len(names):
        raise ValueError(f"each resource may be named once: {list(names)!r}")
    return names


def ms(seconds: float, what: str, minimum: int = 1) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds")
    value = int(round(seconds * 1000.0))
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum} ms, got {seconds!r} s")
    return value


def parse_address(address: str) -> tuple[str, int]:
    address = address.strip()
    if address.startswith("["):  # [::1]:7400
        host, _, port = address[1:].partition("]:")
    else:
        host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address must be HOST:PORT, got {address!r}")
    return host, int(port)


# ----------------------------------------------------------------------------------------------
# Requests and replies


class Grant(NamedTuple):
    """An `OK <owner> <fence> <validity_ms>` to LOCK."""

    owner: str
    fence: int
    validity: float  # seconds


class Status(NamedTuple):
    """STATUS of a resource, read from the masters (never its owner): the lock, its shared
    holders and the semaphore of the same name."""

    held: bool  # an exclusive LOCK now would be refused
    remaining: float  # seconds at least before a LOCK could succeed (unless released); 0 if free
    label: Optional[str] = None  # the holder's LABEL, if its LOCK gave one (never the owner)
    readers: int = 0  # shared holders (`readers=`), 0 when none
    permits_used: int = 0  # permits of the semaphore of that name in use (`permits=<used>/<n>`)
    permits: int = 0  # the number of permits in force for it; 0 when none is in use


class Kind:
    """What a Lease holds (`Lease.kind`); the owner says it too (proto/PROTOCOL.md)."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"
    PERMIT = "permit"
    SET = "set"


class ListedLock(NamedTuple):
    """One resource LIST found held on a majority of the masters (never its owner)."""

    resource: str
    kind: str  # "exclusive" (protocol 1.1 may list other kinds)
    remaining: float  # seconds at least, as Status.remaining
    labels: List[str]


class Listing(NamedTuple):
    """LIST's answer: the locks, sorted by resource, and whether more were left out."""

    locks: List[ListedLock]
    truncated: bool


def _lock_options(wait: Optional[float], keep: bool, label: Optional[str],
                  max_hold: Optional[float]) -> str:
    line = ""
    if wait is not None:
        line += f" WAIT {ms(wait, 'wait', minimum=0)}"
    if keep:
        line += " KEEP"
    if label is not None:
        line += f" LABEL {label_token(label)}"
    if max_hold is not None:
        if not keep:
            raise ValueError("max_hold needs keep=True: the daemon renews only KEEP locks")
        line += f" MAXHOLD {ms(max_hold, 'max_hold')}"
    return line


def lock_request(resource: str, ttl: float, wait: Optional[float], keep: bool, *,
                 shared: bool = False, permits: Optional[int] = None,
                 label: Optional[str] = None, max_hold: Optional[float] = None) -> str:
    """LOCK of one resource: exclusive, SHARED, or one of PERMITS n."""
    line = f"LOCK {token(resource, 'resource')} {ms(ttl, 'ttl')}"
    if shared and permits is not None:
        raise ValueError("a lock is shared or a permit of a semaphore, not both")
    if shared:
        line += " SHARED"
    if permits is not None:
        line += f" PERMITS {permits_count(permits)}"
    return line + _lock_options(wait, keep, label, max_hold)


def kind_of(shared: bool, permits: Optional[int]) -> str:
    if permits is not None:
        return Kind.PERMIT
    return Kind.SHARED if shared else Kind.EXCLUSIVE


def mlock_request(resources: tuple[str, ...], ttl: float, wait: Optional[float], keep: bool, *,
                  label: Optional[str] = None, max_hold: Optional[float] = None) -> str:
    """MLOCK: every resource or none (resources from resource_list)."""
    line = f"MLOCK {len(resources)} {' '.join(resources)} {ms(ttl, 'ttl')}"
    return line + _lock_options(wait, keep, label, max_hold)


def release_prefix(resources: tuple[str, ...], is_set: bool) -> str:
    """What releases a grant, without its owner: `UNLOCK r` or `MUNLOCK n r1 .. rn`."""
    if is_set:
        return f"MUNLOCK {len(resources)} {' '.join(resources)}"
    return f"UNLOCK {resources[0]}"


def munlock_request(resources: Iterable[str], owner: str) -> str:
    names = resource_list(resources)
    return f"MUNLOCK {len(names)} {' '.join(names)} {token(owner, 'owner')}"


def mextend_request(resources: Iterable[str], owner: str, ttl: float) -> str:
    names = resource_list(resources)
    return f"MEXTEND {len(names)} {' '.join(names)} {token(owner, 'owner')} {ms(ttl, 'ttl')}"


def unlock_request(resource: str, owner: str) -> str:
    return f"UNLOCK {token(resource, 'resource')} {token(owner, 'owner')}"


def extend_request(resource: str, owner: str, ttl: float) -> str:
    return f"EXTEND {token(resource, 'resource')} {token(owner, 'owner')} {ms(ttl, 'ttl')}"


def status_request(resource: str) -> str:
    return f"STATUS {token(resource, 'resource')}"


def parse_grant(reply: str, resource: str) -> Grant:
    parts = reply.split(" ")
    if parts[0] != "OK" or len(parts) != 4:
        raise error_from_reply(reply, resource)
    return Grant(parts[1], int(parts[2]), int(parts[3]) / 1000.0)


def parse_ok(reply: str, resource: str = "") -> None:
    if reply != "OK":
        raise error_from_reply(reply, resource)


def parse_validity(reply: str, resource: str) -> float:
    """EXTEND's `OK <validity_ms>`, in seconds."""
    parts = reply.split(" ")
    if parts[0] != "OK" or len(parts) != 2:
        raise error_from_reply(reply, resource)
    return int(parts[1]) / 1000.0


def list_request(prefix: str, count: Optional[int]) -> str:
    line = "LIST"
    if prefix:
        line += f" {token(prefix, 'prefix')}"
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, not {count!r}")
        line += f" COUNT {count}"
    return line


def parse_listing(reply: str) -> Listing:
    if not reply.startswith("OK {"):
        raise error_from_reply(reply)
    body = json.loads(reply[3:])
    locks = [
        ListedLock(lock["resource"], lock["kind"], lock["ttl_ms"] / 1000.0, list(lock["labels"]))
        for lock in body["locks"]
    ]
    return Listing(locks, bool(body["truncated"]))


def parse_status(reply: str, resource: str) -> Status:
    """`OK HELD <pttl_ms> [field=value...]` or `OK FREE [field=value...]`; the fields are
    label=, readers= and permits=<used>/<n>, in any order (others are ignored)."""
    parts = reply.split(" ")
    held = parts[:2] == ["OK", "HELD"] and len(parts) >= 3 and parts[2].isdigit()
    if not held and parts[:2] != ["OK", "FREE"]:
        raise error_from_reply(reply, resource)
    fields = {}
    for part in parts[3 if held else 2:]:
        name, equals, value = part.partition("=")
        if not equals:
            raise error_from_reply(reply, resource)
        fields[name] = value
    try:
        readers = int(fields.get("readers", "0"))
        used, _, total = fields.get("permits", "0/0").partition("/")
        status = Status(held, int(parts[2]) / 1000.0 if held else 0.0, fields.get("label"),
                        readers, int(used), int(total))
    except ValueError:
        raise ServerError("PROTOCOL", f"unexpected reply {reply!r}") from None
    return status


def parse_pong(reply: str) -> None:
    if reply != "PONG":
        raise error_from_reply(reply)


def parse_hello(reply: str) -> str:
    """HELLO's `OK redlockd <version> proto=1 ...`, without the OK."""
    if not reply.startswith("OK "):
        raise error_from_reply(reply)
    return reply[3:]


def check_protocol(hello: str) -> None:
    """Protocol 1 and its compatible revisions (proto=1.1 serves the lock family)."""
    if not any(word == "proto=1" or word.startswith("proto=1.") for word in hello.split(" ")):
        raise ServerError("PROTOCOL", f"not a redlockd speaking protocol 1: {hello!r}")


def parse_info(reply: str) -> dict:
    if not reply.startswith("OK "):
        raise error_from_reply(reply)
    return json.loads(reply[3:])
