"""What both clients (threads and asyncio) share: the errors, the checks on arguments, each
request's line and the reading of its reply. No I/O here: a new request kind is one builder and
one parser, used by both clients."""

from __future__ import annotations

import json
from typing import NamedTuple, Optional

__all__ = [
    "AuthError",
    "ConnectionLost",
    "LockBusy",
    "NoQuorum",
    "NotHeld",
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
    """STATUS of a resource, read from the masters (never its owner)."""

    held: bool  # a LOCK now would be refused
    remaining: float  # seconds at least before a LOCK could succeed (unless released); 0 if free


def lock_request(resource: str, ttl: float, wait: Optional[float], keep: bool) -> str:
    line = f"LOCK {token(resource, 'resource')} {ms(ttl, 'ttl')}"
    if wait is not None:
        line += f" WAIT {ms(wait, 'wait', minimum=0)}"
    if keep:
        line += " KEEP"
    return line


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


def parse_status(reply: str, resource: str) -> Status:
    parts = reply.split(" ")
    if parts[:2] == ["OK", "HELD"] and len(parts) == 3:
        return Status(True, int(parts[2]) / 1000.0)
    if parts == ["OK", "FREE"]:
        return Status(False, 0.0)
    raise error_from_reply(reply, resource)


def parse_pong(reply: str) -> None:
    if reply != "PONG":
        raise error_from_reply(reply)


def parse_hello(reply: str) -> str:
    """HELLO's `OK redlockd <version> proto=1 ...`, without the OK."""
    if not reply.startswith("OK "):
        raise error_from_reply(reply)
    return reply[3:]


def check_protocol(hello: str) -> None:
    if " proto=1" not in f" {hello}":
        raise ServerError("PROTOCOL", f"not a redlockd speaking protocol 1: {hello!r}")


def parse_info(reply: str) -> dict:
    if not reply.startswith("OK "):
        raise error_from_reply(reply)
    return json.loads(reply[3:])
