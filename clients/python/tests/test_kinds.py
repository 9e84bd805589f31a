"""The lock family of protocol 1.1 (SHARED, PERMITS, MLOCK) through the threaded and the asyncio
client, against real redis-server masters and the real redlockd binary. A daemon that does not
say proto=1.1 fails every test here, saying so."""

from __future__ import annotations

import asyncio
import threading
import unittest

import redlockd
import redlockd.aio

from .harness import Daemon, Fleet, eventually
from .test_client import _FleetCase


def _require_kinds(daemon: Daemon) -> None:
    c = redlockd.Client([daemon.address])
    try:
        hello = c.hello()
    finally:
        c.close()
    if "proto=1.1" not in hello.split(" "):
        raise RuntimeError(f"the daemon at {daemon.address} does not serve the lock family "
                           f"(HELLO: {hello!r}, protocol 1.1 needed): build redlockd from a tree "
                           f"where SHARED, PERMITS and MLOCK are served")


class _KindsCase(_FleetCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            _require_kinds(cls.daemon)
        except BaseException:
            super().tearDownClass()
            raise


class SharedTests(_KindsCase):
    def test_readers_share_and_exclude_writers(self):
        a, b, writer = self.client(), self.client(), self.client()
        first = a.acquire("py:rw", ttl=10.0, shared=True)
        second = b.acquire("py:rw", ttl=10.0, shared=True, label="reader:2")
        for lease in (first, second):
            self.assertEqual(lease.kind, redlockd.Kind.SHARED)
            self.assertRegex(lease.owner, r"^00001000[0-9a-f]{32}$")
        self.assertGreater(second.fence, first.fence)
        with self.assertRaises(redlockd.LockBusy):
            writer.acquire("py:rw", ttl=10.0)
        status = writer.status("py:rw")
        self.assertTrue(status.held)
        self.assertEqual(status.readers, 2)
        self.assertGreater(status.remaining, 5.0)
        self.assertNotIn(first.owner, repr(status))
        self.assertGreater(first.extend(20.0), 10.0)  # EXTEND works for every kind
        first.release()
        self.assertEqual(writer.status("py:rw").readers, 1)
        second.release()
        with writer.lock("py:rw", ttl=10.0) as exclusive:
            self.assertGreater(exclusive.fence, second.fence)
            with self.assertRaises(redlockd.LockBusy):
                a.acquire("py:rw", ttl=10.0, shared=True)
        self.assertEqual(writer.status("py:rw"), redlockd.Status(False, 0.0))

    def test_a_waiting_writer_is_not_starved_by_new_readers(self):
        reader, writer, late = self.client(), self.client(), self.client()
        held = reader.acquire("py:rw-intent", ttl=30.0, shared=True)
        result: dict = {}

        def write() -> None:
            try:
                result["lease"] = writer.acquire("py:rw-intent", ttl=10.0, wait=30.0)
            except BaseException as error:  # noqa: BLE001
                result["error"] = error

        t = threading.Thread(target=write)
        t.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1))
        # The writer's intent refuses new readers (on a connection of their own).
        self.assertTrue(eventually(lambda: _busy(lambda: late.acquire(
            "py:rw-intent", ttl=1.0, shared=True))), "a reader got in ahead of a waiting writer")
        held.release()
        t.join(20.0)
        self.assertNotIn("error", result)
        self.assertEqual(result["lease"].kind, redlockd.Kind.EXCLUSIVE)
        result["lease"].release()
        late.acquire("py:rw-intent", ttl=1.0, shared=True).release()

    def test_shared_rlock_is_reentrant_per_thread_and_shared_between_threads(self):
        c, other = self.client(), self.client()
        lock = c.rlock("py:rw-re", ttl=10.0, shared=True)
        with lock as outer, lock as inner:
            self.assertIs(inner, outer)
            self.assertEqual(lock.count, 2)
            # Another thread of the same client takes its own shared hold.
            def elsewhere():
                with c.rlock("py:rw-re", ttl=10.0, shared=True) as mine:
                    return mine.owner
            owner = _run_in_thread(elsewhere)
            self.assertIsInstance(owner, str)
            self.assertNotEqual(owner, outer.owner)
            with self.assertRaises(redlockd.LockBusy):
                other.acquire("py:rw-re", ttl=1.0)
        self.assertFalse(other.status("py:rw-re").held)


class PermitTests(_KindsCase):
    def test_at_most_n_permits(self):
        a, b, c = self.client(), self.client(), self.client()
        first = a.acquire("py:pool", ttl=10.0, permits=2)
        second = b.semaphore("py:pool", 2, ttl=10.0)
        for permit in (first, second):
            self.assertEqual(permit.kind, redlockd.Kind.PERMIT)
            self.assertEqual(permit.permits, 2)
            self.assertRegex(permit.owner, r"^00002[0-9a-f]{35}$")
        self.assertEqual({first.slot, second.slot}, {0, 1})
        with self.assertRaises(redlockd.LockBusy):
            c.acquire("py:pool", ttl=10.0, permits=2)
        status = c.status("py:pool")
        self.assertEqual((status.permits_used, status.permits), (2, 2))
        self.assertFalse(status.held, "a semaphore and a lock of the same name are different things")
        with self.assertRaises(redlockd.PermitsMismatch) as caught:
            c.acquire("py:pool", ttl=10.0, permits=3)
        self.assertEqual(caught.exception.code, "PERMITS_MISMATCH")
        self.assertIsInstance(caught.exception, redlockd.ServerError)
        with c.lock("py:pool", ttl=10.0):  # the lock named like the semaphore
            pass
        self.assertGreater(first.extend(20.0), 10.0)
        first.release()
        with c.semaphore("py:pool", 2, ttl=10.0) as third:
            self.assertEqual(third.slot, first.slot)
            self.assertEqual(c.status("py:pool").permits_used, 2)
        second.release()
        self.assertEqual(c.status("py:pool"), redlockd.Status(False, 0.0))
        with self.assertRaises(ValueError):
            c.acquire("py:pool", ttl=1.0, permits=0)
        with self.assertRaises(ValueError):
            c.acquire("py:pool", ttl=1.0, permits=2, shared=True)

    def test_a_permit_waiter_gets_the_released_permit(self):
        holder, waiter = self.client(), self.client()
        held = holder.semaphore("py:pool-wait", 1, ttl=30.0)
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(
            lease=waiter.semaphore("py:pool-wait", 1, ttl=10.0, wait=30.0)))
        t.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1))
        held.release()
        t.join(20.0)
        self.assertGreater(result["lease"].fence, held.fence)
        result["lease"].release()

    def test_permit_rlock(self):
        c = self.client()
        lock = c.rlock("py:pool-re", ttl=10.0, permits=3)
        with lock as outer, lock as inner:
            self.assertIs(inner, outer)
            self.assertEqual(c.status("py:pool-re").permits_used, 1)
        self.assertEqual(c.status("py:pool-re").permits_used, 0)


class SetTests(_KindsCase):
    def test_all_or_nothing(self):
        a, b = self.client(), self.client()
        lease = a.acquire_many(["py:acct:1", "py:acct:2"], ttl=10.0, label="transfer")
        self.assertEqual(lease.kind, redlockd.Kind.SET)
        self.assertEqual(lease.resources, ("py:acct:1", "py:acct:2"))
        self.assertEqual(lease.resource, "py:acct:1")
        self.assertRegex(lease.owner, r"^00003000[0-9a-f]{32}$")
        for resource in ("py:acct:1", "py:acct:2"):
            with self.assertRaises(redlockd.LockBusy):
                b.acquire(resource, ttl=1.0)
            self.assertEqual(b.status(resource).label, "transfer")
        # A set that overlaps in one resource gets none: py:acct:3 stays free.
        with self.assertRaises(redlockd.LockBusy):
            b.acquire_many(["py:acct:3", "py:acct:2"], ttl=1.0)
        self.assertFalse(b.status("py:acct:3").held)
        self.assertGreater(lease.extend(20.0), 10.0)
        self.assertGreater(b.status("py:acct:2").remaining, 10.0)
        # Fewer resources than the set: only those.
        a.unlock_many(["py:acct:2"], lease.owner)
        self.assertFalse(b.status("py:acct:2").held)
        self.assertTrue(b.status("py:acct:1").held)
        # UNLOCK with the set's owner releases that one resource; then nothing of it is left.
        a.unlock("py:acct:1", lease.owner)
        self.assertFalse(b.status("py:acct:1").held)
        with self.assertRaises(redlockd.NotHeld):
            lease.release()

        with b.lock_many(["py:acct:2", "py:acct:1"], ttl=10.0, wait=5.0) as other:
            self.assertGreater(other.fence, lease.fence)
            self.assertGreater(a.extend_many(["py:acct:1"], other.owner, 15.0), 10.0)
        for resource in ("py:acct:1", "py:acct:2"):
            self.assertFalse(b.status(resource).held)
        for bad in ([], ["a", "a"], "py:acct:1", ["two words"]):
            with self.assertRaises((ValueError, TypeError)):
                a.acquire_many(bad, ttl=1.0)

    def test_a_set_waiter_is_granted_when_a_member_is_released(self):
        holder, waiter = self.client(), self.client()
        held = holder.acquire("py:set-wait:b", ttl=30.0)
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(
            lease=waiter.acquire_many(["py:set-wait:a", "py:set-wait:b"], ttl=10.0, wait=30.0)))
        t.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1))
        self.assertFalse(holder.status("py:set-wait:a").held, "a waiting set holds nothing")
        held.release()
        t.join(20.0)
        self.assertIn("lease", result)
        result["lease"].release()

    def test_set_rlock(self):
        c, other = self.client(), self.client()
        lock = c.rlock_many(["py:set-re:a", "py:set-re:b"], ttl=10.0)
        with lock as outer:
            # The same set named in another order is the same lock.
            with c.rlock_many(["py:set-re:b", "py:set-re:a"], ttl=10.0) as inner:
                self.assertIs(inner, outer)
            with self.assertRaises(redlockd.LockBusy):
                other.acquire("py:set-re:b", ttl=1.0)
        self.assertFalse(other.status("py:set-re:b").held)


class KindsLostTests(_KindsCase):
    def test_keep_set_and_permit_are_lost_when_three_masters_die(self):
        c = self.client()
        seen: list = []
        done = threading.Event()

        def on_lost(lease) -> None:
            seen.append(lease.kind)
            if len(seen) == 2:
                done.set()

        kept_set = c.acquire_many(["py:lost:a", "py:lost:b"], ttl=1.0, keep=True, on_lost=on_lost)
        permit = c.semaphore("py:lost:pool", 2, ttl=1.0, keep=True, on_lost=on_lost)
        for i in range(3):
            self.fleet.kill(i)
        self.assertTrue(done.wait(20.0), f"LOST not pushed for both (seen {seen})")
        self.assertEqual(sorted(seen), ["permit", "set"])
        self.assertIn("LOST", kept_set.lost_reason)
        kept_set.release()  # reported lost: no NotHeld
        permit.release()


class AioKindsTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(5)
        try:
            cls.daemon = Daemon(cls.fleet.addresses)
            _require_kinds(cls.daemon)
        except BaseException:
            if hasattr(cls, "daemon"):
                cls.daemon.close()
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

    async def test_each_kind_with_async_with(self):
        a, b = self.client(), self.client()
        async with a.lock("aio:rw", ttl=10.0, shared=True) as reader:
            self.assertEqual(reader.kind, redlockd.Kind.SHARED)
            async with b.lock("aio:rw", ttl=10.0, shared=True):
                self.assertEqual((await b.status("aio:rw")).readers, 2)
            with self.assertRaises(redlockd.LockBusy):
                await b.acquire("aio:rw", ttl=1.0)
        async with a.semaphore("aio:pool", 1, ttl=10.0) as permit:
            self.assertEqual(permit.slot, 0)
            with self.assertRaises(redlockd.LockBusy):
                await b.acquire("aio:pool", ttl=1.0, permits=1)
            with self.assertRaises(redlockd.PermitsMismatch):
                await b.acquire("aio:pool", ttl=1.0, permits=2)
        async with a.lock_many(["aio:set:1", "aio:set:2"], ttl=10.0) as held:
            self.assertEqual(held.resources, ("aio:set:1", "aio:set:2"))
            with self.assertRaises(redlockd.LockBusy):
                await b.acquire("aio:set:2", ttl=1.0)
            self.assertGreater(await held.extend(20.0), 10.0)
        for resource in ("aio:rw", "aio:set:1", "aio:set:2"):
            self.assertFalse((await b.status(resource)).held)
        self.assertEqual((await b.status("aio:pool")).permits_used, 0)

    async def test_a_cancelled_set_wait_releases_its_late_grant(self):
        holder, waiter, third = self.client(), self.client(), self.client()
        held = await holder.acquire("aio:set-cancel:b", ttl=30.0)
        task = asyncio.create_task(waiter.acquire_many(
            ["aio:set-cancel:a", "aio:set-cancel:b"], ttl=60.0, wait=30.0))
        self.assertTrue(await asyncio.to_thread(
            eventually, lambda: self.daemon.info()["waiters"] == 1))
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        acquired = (await asyncio.to_thread(self.daemon.info))["counters"]["acquired"]
        await held.release()  # the daemon now grants the set to the abandoned wait

        async def both_free() -> bool:
            try:
                await (await third.acquire_many(["aio:set-cancel:a", "aio:set-cancel:b"],
                                                ttl=1.0)).release()
                return True
            except redlockd.LockBusy:
                return False

        for _ in range(500):
            if await both_free():
                break
            await asyncio.sleep(0.02)
        else:
            self.fail("the set granted to the cancelled wait was not released (MUNLOCK)")
        counters = (await asyncio.to_thread(self.daemon.info))["counters"]
        self.assertGreaterEqual(counters["acquired"], acquired + 2,
                                "the cancelled wait was never granted: the test proved nothing")
        await waiter.ping()

    async def test_kinds_rlock_per_task(self):
        c = self.client()
        lock = c.rlock_many(["aio:set-re:a", "aio:set-re:b"], ttl=10.0)
        async with lock as outer, lock as inner:
            self.assertIs(inner, outer)
            self.assertEqual(lock.count, 2)
        shared = c.rlock("aio:rw-re", ttl=10.0, shared=True)
        async with shared as outer:
            async def other_task():
                async with shared as mine:  # another task: a hold of its own, shared
                    return mine.owner
            self.assertNotEqual(await asyncio.create_task(other_task()), outer.owner)


def _busy(call) -> bool:
    try:
        call().release()
    except redlockd.LockBusy:
        return True
    return False


def _run_in_thread(call):
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(value=call()))
    t.start()
    t.join(30.0)
    return out.get("value")


if __name__ == "__main__":
    unittest.main()
