"""redlockd.RLock and redlockd.aio.RLock, reentrant per thread and per asyncio task, against real
redis-server masters and the real redlockd binary. The exclusive lock needs protocol 1 only;
the other kinds are in test_kinds.py."""

from __future__ import annotations

import asyncio
import threading
import time
import unittest

import redlockd
import redlockd.aio

from .harness import Daemon, Fleet, eventually
from .test_client import _FleetCase


def _in_thread(call):
    """Runs call() on another thread; returns its result or the exception it raised."""
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as error:  # noqa: BLE001 - returned to the test
            out["value"] = error

    t = threading.Thread(target=run)
    t.start()
    t.join(30.0)
    return out.get("value")


def _counter(daemon: Daemon, name: str) -> int:
    return daemon.info()["counters"][name]


class RLockTests(_FleetCase):
    def test_reentrant_per_thread_counting_holds(self):
        c, other = self.client(), self.client()
        lock = c.rlock("py:re", ttl=10.0)
        with self.assertRaises(RuntimeError):
            lock.release()
        with lock as outer:
            acquired = _counter(self.daemon, "acquired")
            with lock as inner:
                self.assertIs(inner, outer, "a re-entry keeps the lease, its owner and its fence")
                self.assertTrue(lock.acquire(blocking=False))
                self.assertTrue(lock.acquire(timeout=1.0))
                self.assertEqual(lock.count, 4)
                # Another RLock of the same client on the same resource and kind is the same lock.
                same = c.rlock("py:re", ttl=10.0)
                with same as third:
                    self.assertIs(third, outer)
                    self.assertEqual(lock.count, 5)
                self.assertEqual(_counter(self.daemon, "acquired"), acquired, "a re-entry sent LOCK")
                # Another thread of the same client, and another client, do not hold it.
                self.assertIs(_in_thread(lambda: lock.acquire(blocking=False)), False)
                self.assertIsInstance(_in_thread(lock.release), RuntimeError)
                with self.assertRaises(redlockd.LockBusy):
                    other.acquire("py:re", ttl=1.0)
                lock.release()
                lock.release()
            self.assertEqual(lock.count, 1)
            with self.assertRaises(redlockd.LockBusy):
                other.acquire("py:re", ttl=1.0)  # released before the last release
        self.assertEqual(lock.count, 0)
        self.assertFalse(other.status("py:re").held)
        with self.assertRaises(RuntimeError):
            lock.lease  # noqa: B018 - the property raises
        with self.assertRaises(RuntimeError):
            lock.release()
        other.acquire("py:re", ttl=1.0).release()

    def test_reentry_never_shortens_the_lease(self):
        c, other = self.client(), self.client()
        outer = c.rlock("py:re-renew", ttl=3.0)
        shorter = c.rlock("py:re-renew", ttl=0.5)
        with outer as lease:
            extended = _counter(self.daemon, "extended")
            shorter.acquire()  # more than a third of 3 s left: counted, nothing sent
            self.assertEqual(_counter(self.daemon, "extended"), extended)
            self.assertTrue(eventually(lambda: lease.remaining() < 0.9, 5.0))
            shorter.acquire()  # under a third left: EXTEND to the 3 s it was set to, not 0.5 s
            self.assertEqual(_counter(self.daemon, "extended"), extended + 1)
            self.assertEqual(outer.count, 3)
            status = other.status("py:re-renew")
            self.assertTrue(status.held and status.remaining > 1.5, status)
            self.assertGreater(lease.remaining(), 1.5)
            self.assertEqual(lease.ttl, 3.0)
            shorter.release()
            shorter.release()
        self.assertFalse(other.status("py:re-renew").held)

    def test_reentry_with_a_longer_ttl_makes_the_lease_last_that_long(self):
        c, other = self.client(), self.client()
        with c.rlock("py:re-longer", ttl=1.0) as lease:
            with c.rlock("py:re-longer", ttl=30.0) as inner:
                self.assertIs(inner, lease)
                self.assertGreater(lease.remaining(), 20.0)
                self.assertGreater(other.status("py:re-longer").remaining, 20.0)
                # A margin of 0: the next re-entry is left alone while anything is left.
                extended = _counter(self.daemon, "extended")
                with c.rlock("py:re-longer", ttl=60.0, margin=0.0):
                    self.assertEqual(_counter(self.daemon, "extended"), extended)
        self.assertFalse(other.status("py:re-longer").held)

    def test_reentry_into_a_lost_lock_raises_and_never_locks(self):
        c, other = self.client(), self.client()
        lock = c.rlock("py:re-lost", ttl=0.5)
        lock.acquire()
        lease = lock.lease
        self.assertTrue(eventually(lambda: not other.status("py:re-lost").held, 10.0))
        thief = other.acquire("py:re-lost", ttl=30.0)
        acquired = _counter(self.daemon, "acquired")
        with self.assertRaises(redlockd.LockLost) as caught:
            lock.acquire()
        self.assertIsInstance(caught.exception.__cause__, redlockd.NotHeld)
        self.assertEqual(_counter(self.daemon, "acquired"), acquired, "the re-entry fell back to LOCK")
        self.assertTrue(lease.lost.is_set())
        self.assertIn("no longer held", lease.lost_reason)
        with self.assertRaises(redlockd.LockLost):
            lock.acquire()  # lost stays lost
        self.assertEqual(lock.count, 1)
        lock.release()  # the loss was reported: no NotHeld
        self.assertEqual(lock.count, 0)
        self.assertTrue(other.status("py:re-lost").held, "the thief's lock is untouched")
        thief.release()

    def test_reentry_into_a_lost_keep_lock_raises(self):
        c = self.client()
        lost = threading.Event()
        # MAXHOLD ends the KEEP lock after 0.5 s: the daemon pushes LOST.
        lock = c.rlock("py:re-keep", ttl=1.0, keep=True, max_hold=0.5, on_lost=lambda _: lost.set())
        with self.assertRaises(redlockd.LockLost):
            with lock as lease:
                self.assertTrue(lease.keep)
                with lock:
                    pass  # a KEEP lock is renewed by the daemon: a re-entry sends nothing
                self.assertTrue(lost.wait(10.0), "no LOST after MAXHOLD")
                self.assertIn("LOST", lease.lost_reason)
                with lock:
                    self.fail("re-entered a lost lock")
        self.assertEqual(lock.count, 0)

    def test_acquire_waits_in_the_daemon_queue(self):
        holder, c = self.client(), self.client()
        held = holder.acquire("py:re-wait", ttl=30.0)
        lock = c.rlock("py:re-wait", ttl=10.0)
        self.assertFalse(lock.acquire(blocking=False))
        busy = _counter(self.daemon, "busy")
        self.assertFalse(lock.acquire(timeout=0.3))
        self.assertEqual(_counter(self.daemon, "busy"), busy + 1, "one LOCK ... WAIT, not polling")
        result: dict = {}

        def waiter() -> None:
            result["got"] = lock.acquire()
            result["fence"] = lock.lease.fence
            lock.release()

        t = threading.Thread(target=waiter)
        t.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1))
        held.release()
        t.join(20.0)
        self.assertEqual(result.get("got"), True)
        self.assertGreater(result["fence"], held.fence)
        with self.assertRaises(ValueError):
            lock.acquire(blocking=False, timeout=1.0)

    def test_many_threads_never_overlap_and_fences_increase(self):
        clients = [self.client(), self.client()]
        inside, overlaps, errors = [0], [0], []
        fences: list[int] = []
        guard = threading.Lock()

        def worker(n: int) -> None:
            client = clients[n % 2]
            shared = client.rlock("py:re-many", ttl=10.0)
            mine = client.rlock(f"py:re-many:own:{n}", ttl=30.0)
            try:
                for _ in range(5):
                    with mine, shared as lease, shared:
                        with guard:
                            inside[0] += 1
                            overlaps[0] += inside[0] != 1
                            fences.append(lease.fence)
                        time.sleep(0.002)
                        with guard:
                            inside[0] -= 1
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120.0)
        self.assertEqual(errors, [])
        self.assertEqual(overlaps[0], 0, "two holders at once")
        self.assertEqual(len(fences), 40)
        self.assertEqual(fences, sorted(fences))
        self.assertEqual(len(set(fences)), 40)


class AioRLockTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(5)
        try:
            cls.daemon = Daemon(cls.fleet.addresses)
        except BaseException:
            cls.fleet.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        cls.fleet.close()

    async def asyncSetUp(self):
        self.clients: list[redlockd.aio.Client] = []

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()

    def client(self) -> redlockd.aio.Client:
        c = redlockd.aio.Client([self.daemon.address])
        self.clients.append(c)
        return c

    async def counter(self, name: str) -> int:
        return (await asyncio.to_thread(self.daemon.info))["counters"][name]

    async def test_reentrant_per_task(self):
        c, other = self.client(), self.client()
        lock = c.rlock("aio:re", ttl=10.0)
        async with lock as outer:
            acquired = await self.counter("acquired")
            async with c.rlock("aio:re", ttl=10.0) as inner:
                self.assertIs(inner, outer)
                self.assertEqual(lock.count, 2)
                self.assertEqual(await self.counter("acquired"), acquired, "a re-entry sent LOCK")

                # A task started here is another task: it does not hold the lock.
                async def elsewhere() -> bool:
                    got = await lock.acquire(blocking=False)
                    self.assertEqual(lock.count, 0)
                    return got

                self.assertFalse(await asyncio.create_task(elsewhere()))
                with self.assertRaises(RuntimeError):
                    await asyncio.create_task(lock.release())
            with self.assertRaises(redlockd.LockBusy):
                await other.acquire("aio:re", ttl=1.0)
        self.assertEqual(lock.count, 0)
        self.assertFalse((await other.status("aio:re")).held)
        with self.assertRaises(RuntimeError):
            await lock.release()

    async def test_reentry_extends_without_shortening_and_raises_when_lost(self):
        c, other = self.client(), self.client()
        outer = c.rlock("aio:re-renew", ttl=3.0)
        async with outer as lease:
            self.assertTrue(await asyncio.to_thread(eventually, lambda: lease.remaining() < 0.9))
            extended = await self.counter("extended")
            async with c.rlock("aio:re-renew", ttl=0.5):
                self.assertEqual(await self.counter("extended"), extended + 1)
                self.assertGreater(lease.remaining(), 1.5)
                self.assertGreater((await other.status("aio:re-renew")).remaining, 1.5)

        lock = c.rlock("aio:re-lost", ttl=0.5)
        await lock.acquire()
        lease = lock.lease

        async def free() -> bool:
            return not (await other.status("aio:re-lost")).held

        deadline = time.monotonic() + 10.0
        while not await free():
            self.assertLess(time.monotonic(), deadline, "the 0.5 s lease never ran out")
            await asyncio.sleep(0.02)
        thief = await other.acquire("aio:re-lost", ttl=30.0)
        acquired = await self.counter("acquired")
        with self.assertRaises(redlockd.LockLost) as caught:
            await lock.acquire()
        self.assertIsInstance(caught.exception.__cause__, redlockd.NotHeld)
        self.assertEqual(await self.counter("acquired"), acquired, "the re-entry fell back to LOCK")
        self.assertTrue(lease.lost.is_set())
        await lock.release()  # reported lost: no NotHeld
        await thief.release()


if __name__ == "__main__":
    unittest.main()
