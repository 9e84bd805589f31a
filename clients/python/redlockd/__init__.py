"""Client for redlockd, the Redlock lock daemon (protocol v1.1). Standard library only.

    import redlockd
    client = redlockd.Client(["127.0.0.1:7400", "127.0.0.1:7410"])
    with client.lock("orders:1", ttl=10.0, wait=5.0) as lease:
        write_with_fence(lease.fence)

The lock family: `client.lock(r, ttl=..., shared=True)` (a read lock), `client.semaphore(r, n,
ttl=...)` (one of n permits), `client.lock_many([r1, r2], ttl=...)` (all or nothing), and
`client.rlock(r, ttl=...)`, reentrant per thread like threading.RLock.

One client holds one connection at a time and pipelines every call made on it, from any number
of threads; replies are matched to requests by order, `LOST` pushes are recognised between them.
When the connection fails, calls in flight raise `ConnectionLost`, every KEEP lease of that
connection is marked lost, and the next call connects to the next address of the list.

`redlockd.aio.Client` is the asyncio variant: `async with client.lock(...) as lease:`.
"""

from ._client import Client, Lease, RLock
from ._protocol import (
    AuthError,
    ConnectionLost,
    Kind,
    ListedLock,
    Listing,
    LockBusy,
    LockLost,
    NoQuorum,
    NotHeld,
    PermitsMismatch,
    RedlockdError,
    ServerError,
    Status,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "Client",
    "ConnectionLost",
    "Kind",
    "Lease",
    "ListedLock",
    "Listing",
    "LockBusy",
    "LockLost",
    "NoQuorum",
    "NotHeld",
    "PermitsMismatch",
    "RLock",
    "RedlockdError",
    "ServerError",
    "Status",
    "Unavailable",
]
