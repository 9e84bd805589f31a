"""Run by scripts/test-clients (python-package) with the interpreter of a virtual environment into
which the package was installed with pip, from outside the checkout: imports `redlockd` from
site-packages, not from the source tree, and uses it against the daemon at $REDLOCKD_ADDR. Not a
unittest module (its name does not start with test), so the suites never collect it."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import sys
from pathlib import Path

import redlockd
import redlockd.aio


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"package check failed: {what}")


def main() -> None:
    installed = Path(redlockd.__file__).resolve().parent
    check(Path(sys.prefix).resolve() in installed.parents,
          f"redlockd was imported from {installed}, not from the environment {sys.prefix}")
    check((installed / "py.typed").is_file(), "py.typed is not installed")
    check(redlockd.__version__ == importlib.metadata.version("redlockd"),
          f"__version__ {redlockd.__version__} differs from the installed metadata")
    check(importlib.metadata.metadata("redlockd")["License"] == "Apache-2.0",
          "the metadata's License is not Apache-2.0")

    address = os.environ["REDLOCKD_ADDR"]
    with redlockd.Client([address]) as client:
        check(client.hello().startswith("redlockd "), "hello")
        with client.lock("package:py", ttl=10.0) as lease:
            check(lease.fence > 0 and 0 < lease.remaining() <= 10.0, f"lease {lease!r}")
            check(client.status("package:py").held, "status while held")
        check(client.status("package:py") == redlockd.Status(False, 0.0), "status once released")
        lock = client.rlock("package:py", ttl=10.0)
        with lock as outer, lock as inner:
            check(inner is outer and lock.count == 2, "rlock re-entry")
        check(not client.status("package:py").held, "rlock released")

    async def with_asyncio() -> None:
        async with redlockd.aio.Client([address]) as client:
            check((await client.hello()).startswith("redlockd "), "aio hello")
            async with client.lock("package:aio", ttl=10.0, keep=True) as lease:
                check(lease.remaining() > 0, "aio remaining")
                check((await client.status("package:aio")).held, "aio status")

    asyncio.run(with_asyncio())
    print(f"redlockd {redlockd.__version__} from {installed}: lock, status, hello and asyncio work")


if __name__ == "__main__":
    main()
