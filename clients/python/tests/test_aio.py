"""The asyncio client against real redis-server masters and the real redlockd binary: what the
threaded client's suite (test_client.py) covers, awaited, plus cancellation."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import tempfile
import time
import unittest
from pathlib import Path

import redlockd
import redlockd.aio

from .harness import Daemon, Fleet, eventually, make_pki


async def eventually_async(predicate, timeout: float = 10.0) -> bool:
    """eventually() for a predicate that reads the daemon over a blocking socket."""
    return await asyncio.to_thread(eventually, predicate, timeout)


class _AioFleetCase(unittest.IsolatedAsyncioTestCase):
    """Five masters and one daemon for the whole class; clients closed after each test."""

    daemon_extra: dict = {}
    daemon_env: dict = {}
    secret = None

    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(5)
        try:
            cls.daemon = Daemon(cls.fleet.addresses, cls.daemon_extra, cls.daemon_env, cls.secret)
        except BaseException:
            cls.fleet.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        cls.fleet.close()

    async def asyncSetUp(self):
        self.clients = []

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()

    def client(self, addresses=None, **kwargs) -> redlockd.aio.Client:
        c = redlockd.aio.Client(addresses or [self.daemon.address], **kwargs)
        self.clients.append(c)
        return c

    async def info(self) -> dict:
        return await asyncio.to_thread(self.daemon.info)


class AioLockTests(_AioFleetCase):
    async def test_lock_and_unlock(self):
        a, b = self.client(), self.client()
        async with a.lock("aio:basic", ttl=10.0) as lease:
            self.assertRegex(lease.owner, r"^[0-9a-f]{40}$")
            self.assertGreater(lease.fence, 0)
            self.assertGreater(lease.validity, 0.0)
            self.assertLessEqual(lease.validity, 10.0)
            with self.assertRaises(redlockd.LockBusy):
                await b.acquire("aio:basic", ttl=10.0)
        # Released at the end of the block: free again, with a larger fence.
        again = await b.acquire("aio:basic", ttl=10.0)
        self.assertGreater(again.fence, lease.fence)
        await again.release()
        with self.assertRaises(redlockd.NotHeld):
            await a.unlock("aio:basic", again.owner)

    async def test_released_when_the_block_raises(self):
        c = self.client()
        with self.assertRaises(ZeroDivisionError):
            async with c.lock("aio:raise", ttl=10.0):
                1 / 0
        await (await c.acquire("aio:raise", ttl=10.0)).release()

    async def test_busy_between_two_clients(self):
        a, b = self.client(), self.client()
        lease = await a.acquire("aio:busy", ttl=10.0)
        with self.assertRaises(redlockd.LockBusy) as caught:
            await b.acquire("aio:busy", ttl=10.0)
        self.assertGreater(caught.exception.retry_after, 0.0)
        await lease.release()
        await (await b.acquire("aio:busy", ttl=10.0)).release()

    async def test_extend(self):
        c = self.client()
        lease = await c.acquire("aio:extend", ttl=1.0)
        validity = await lease.extend(20.0)
        self.assertGreater(validity, 1.0)
        self.assertEqual(lease.validity, validity)
        await lease.release()
        with self.assertRaises(redlockd.NotHeld):
            await lease.extend(5.0)

    async def test_status_hello_and_remaining(self):
        c = self.client()
        self.assertEqual(await c.status("aio:status"), redlockd.Status(held=False, remaining=0.0))
        lease = await c.acquire("aio:status", ttl=10.0)
        status = await c.status("aio:status")
        self.assertTrue(status.held)
        self.assertGreater(status.remaining, 5.0)
        self.assertLessEqual(status.remaining, 10.0)
        self.assertGreater(lease.remaining(), 5.0)
        self.assertLessEqual(lease.remaining(), lease.validity)
        await lease.release()
        self.assertFalse((await c.status("aio:status")).held)
        self.assertRegex(await c.hello(), r"^redlockd \S+ proto=1(\.1)? nodes=5 quorum=3$")
        with self.assertRaises(ValueError):
            await c.status("two words")

    async def test_errors(self):
        c = self.client()
        with self.assertRaises(redlockd.ServerError) as caught:
            await c.acquire("aio:err", ttl=7200.0)  # above max_ttl_ms
        self.assertEqual(caught.exception.code, "BAD_TTL")
        with self.assertRaises(ValueError):
            await c.acquire("two words", ttl=1.0)  # refused before it could inject a request
        with self.assertRaises(ValueError):
            await c.acquire("a\nUNLOCK", ttl=1.0)
        with self.assertRaises(redlockd.NotHeld):
            await c.unlock("aio:err", "0" * 40)
        with self.assertRaises(redlockd.ServerError) as caught:
            await c.unlock("aio:err", "f" * 39 + "g")
        self.assertEqual(caught.exception.code, "BAD_OWNER")
        await c.ping()  # the connection is still usable after errors

    async def test_concurrent_calls_are_pipelined(self):
        c = self.client()
        await c.ping()
        before = (await self.info())["clients"]

        async def cycle(i: int) -> int:
            async with c.lock(f"aio:pipe:{i % 50}:{i}", ttl=10.0) as lease:
                return lease.fence

        fences = await asyncio.gather(*(cycle(i) for i in range(200)))
        self.assertEqual(len(set(fences)), 200)
        # No extra connection (an earlier test's closed one may still be in `before`).
        self.assertLessEqual((await self.info())["clients"], before)

    async def test_wait_gets_the_lock_when_the_holder_releases(self):
        holder, waiter = self.client(), self.client()
        lease = await holder.acquire("aio:wait", ttl=30.0)
        task = asyncio.ensure_future(waiter.acquire("aio:wait", ttl=10.0, wait=30.0))
        self.assertTrue(await eventually_async(lambda: self.daemon.info()["waiters"] == 1),
                        "the waiter was never queued")
        await lease.release()
        granted = await asyncio.wait_for(task, 20.0)
        self.assertGreater(granted.fence, lease.fence)
        await granted.release()

    async def test_unlock_behind_a_wait_on_the_same_connection(self):
        # The UNLOCK is pipelined behind the waiting LOCK: the daemon runs it at once, which
        # grants the waiter, and the replies come back in order.
        c = self.client()
        lease = await c.acquire("aio:same-conn", ttl=30.0)
        task = asyncio.ensure_future(c.acquire("aio:same-conn", ttl=10.0, wait=30.0))
        self.assertTrue(await eventually_async(lambda: self.daemon.info()["waiters"] == 1))
        await lease.release()
        granted = await asyncio.wait_for(task, 20.0)
        self.assertGreater(granted.fence, lease.fence)
        await granted.release()

    async def test_wait_that_runs_out_is_busy(self):
        c = self.client()
        lease = await c.acquire("aio:wait-out", ttl=30.0)
        with self.assertRaises(redlockd.LockBusy):
            await c.acquire("aio:wait-out", ttl=10.0, wait=0.2)
        await lease.release()

    async def test_cancelled_wait_releases_what_it_is_granted(self):
        holder, waiter, third = self.client(), self.client(), self.client()
        lease = await holder.acquire("aio:cancel", ttl=30.0)
        task = asyncio.ensure_future(waiter.acquire("aio:cancel", ttl=60.0, wait=30.0))
        self.assertTrue(await eventually_async(lambda: self.daemon.info()["waiters"] == 1))
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        acquired = (await self.info())["counters"]["acquired"]
        await lease.release()  # the daemon grants the abandoned WAIT now

        async def third_gets_it() -> bool:
            for _ in range(1000):
                try:
                    await (await third.acquire("aio:cancel", ttl=1.0)).release()
                    return True
                except redlockd.LockBusy:
                    await asyncio.sleep(0.01)
            return False

        self.assertTrue(await third_gets_it(), "the lock granted to the cancelled waiter stayed")
        self.assertGreaterEqual((await self.info())["counters"]["acquired"], acquired + 2)
        await waiter.ping()

    async def test_keep_is_renewed_past_its_ttl(self):
        c, other = self.client(), self.client()
        lost = asyncio.Event()
        ttl = 1.0
        start = time.monotonic()
        lease = await c.acquire("aio:keep", ttl=ttl, keep=True, on_lost=lambda _: lost.set())
        renewed_before = (await self.info())["counters"]["renewed"]
        # Until three TTLs have passed and the daemon has renewed it several times.
        self.assertTrue(await eventually_async(
            lambda: time.monotonic() - start > 3 * ttl
            and self.daemon.info()["counters"]["renewed"] >= renewed_before + 4, 30.0))
        with self.assertRaises(redlockd.LockBusy):
            await other.acquire("aio:keep", ttl=1.0)
        self.assertFalse(lease.lost.is_set())
        await lease.release()  # raises NotHeld if the renewals had not kept it
        self.assertFalse(lost.is_set())
        await (await other.acquire("aio:keep", ttl=1.0)).release()

    async def test_keep_is_released_when_the_client_closes(self):
        c = redlockd.aio.Client([self.daemon.address])
        other = self.client()
        lease = await c.acquire("aio:keep-close", ttl=30.0, keep=True)
        await c.close()
        await asyncio.wait_for(lease.lost.wait(), 10.0)

        async def other_gets_it() -> bool:
            for _ in range(1000):
                try:
                    await (await other.acquire("aio:keep-close", ttl=1.0)).release()
                    return True
                except redlockd.LockBusy:
                    await asyncio.sleep(0.01)
            return False

        self.assertTrue(await other_gets_it())


class AioLostTests(_AioFleetCase):
    async def test_lost_when_three_masters_die(self):
        c = self.client()
        called = asyncio.Event()
        seen = []

        async def on_lost(lease):  # a coroutine function works too
            seen.append(lease)
            called.set()

        lease = await c.acquire("aio:lost", ttl=1.0, keep=True, on_lost=on_lost)
        # A WAIT pending on the same connection: the LOST push arrives before its reply and must
        # not be taken for it.
        other = self.client()
        await other.acquire("aio:lost-held", ttl=30.0)
        waiter = asyncio.ensure_future(c.acquire("aio:lost-held", ttl=1.0, wait=3.0))
        self.assertTrue(await eventually_async(lambda: self.daemon.info()["waiters"] == 1))
        for i in range(3):
            self.fleet.kill(i)
        await asyncio.wait_for(lease.lost.wait(), 20.0)
        with self.assertRaises((redlockd.LockBusy, redlockd.NoQuorum)):
            await asyncio.wait_for(waiter, 30.0)
        await asyncio.wait_for(called.wait(), 5.0)
        self.assertIs(seen[0], lease)
        self.assertIn("LOST", lease.lost_reason)
        self.assertEqual(lease.remaining(), 0.0)
        await lease.release()  # already reported lost: no NotHeld
        with self.assertRaises(redlockd.NoQuorum) as caught:
            await c.acquire("aio:lost-2", ttl=1.0)
        self.assertEqual(caught.exception.needed, 3)
        with self.assertRaises(redlockd.NoQuorum):
            await c.status("aio:lost-2")


class AioFailoverTests(unittest.IsolatedAsyncioTestCase):
    # A fleet and two daemons per test, both started before any lock: a daemon started later on
    # masters younger than the longest TTL granted on them quarantines them (restart protection).
    async def asyncSetUp(self):
        self.fleet = Fleet(5)
        self.addCleanup(self.fleet.close)
        self.first = Daemon(self.fleet.addresses)
        self.addCleanup(self.first.close)
        self.second = Daemon(self.fleet.addresses)
        self.addCleanup(self.second.close)
        self.clients = []

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()

    def client(self, addresses, **kwargs) -> redlockd.aio.Client:
        c = redlockd.aio.Client(addresses, **kwargs)
        self.clients.append(c)
        return c

    async def test_fails_over_and_keep_locks_are_lost(self):
        c = self.client([self.first.address, self.second.address])
        lost = asyncio.Event()
        kept = await c.acquire("aio:fo", ttl=30.0, keep=True, on_lost=lambda _: lost.set())
        plain = await c.acquire("aio:fo-plain", ttl=30.0)
        self.assertEqual(c.address, self.first.address)
        self.first.kill()
        await asyncio.wait_for(lost.wait(), 10.0)
        self.assertTrue(kept.lost.is_set())
        self.assertIn("connection", kept.lost_reason)
        async with c.lock("aio:fo-new", ttl=10.0) as lease:
            self.assertGreater(lease.fence, plain.fence)
        self.assertEqual(c.address, self.second.address)
        await plain.release()  # a plain lease survives the failover: the second daemon releases it

    async def test_fails_over_from_a_hung_daemon(self):
        c = self.client([self.first.address, self.second.address], timeout=2.0)
        kept = await c.acquire("aio:hung", ttl=30.0, keep=True)
        os.kill(self.first.proc.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, self.first.proc.pid, signal.SIGCONT)
        with self.assertRaises(redlockd.ConnectionLost) as caught:
            await c.ping()
        self.assertIn("no reply", str(caught.exception))
        self.assertTrue(kept.lost.is_set())
        await c.ping()
        self.assertEqual(c.address, self.second.address)

    async def test_a_reply_behind_a_long_wait_is_not_a_hang(self):
        # The PING's reply comes after the WAIT's, later than `timeout` after it was sent.
        holder = self.client([self.first.address])
        c = self.client([self.first.address], timeout=2.0)
        lease = await holder.acquire("aio:hol", ttl=30.0)
        waiter = asyncio.ensure_future(c.acquire("aio:hol", ttl=1.0, wait=4.0))
        self.assertTrue(await eventually_async(lambda: self.first.info()["waiters"] == 1))
        await c.ping()
        with self.assertRaises(redlockd.LockBusy):
            await waiter
        await lease.release()

    async def test_skips_a_dead_first_address(self):
        self.first.kill()
        c = self.client([self.first.address, self.second.address])
        await (await c.acquire("aio:fo-dead", ttl=10.0)).release()
        self.assertEqual(c.address, self.second.address)

    async def test_unavailable_when_every_daemon_is_down(self):
        self.first.kill()
        self.second.kill()
        c = self.client([self.first.address, self.second.address], connect_timeout=2.0)
        with self.assertRaises(redlockd.Unavailable):
            await c.ping()


class AioAuthTests(_AioFleetCase):
    secret = "c0rrect-h0rse"
    daemon_env = {"REDLOCKD_CLIENT_SECRET": "c0rrect-h0rse"}

    async def test_right_secret(self):
        c = self.client(secret="c0rrect-h0rse")
        async with c.lock("aio:auth", ttl=5.0) as lease:
            self.assertGreater(lease.fence, 0)

    async def test_no_secret(self):
        c = self.client()
        with self.assertRaises(redlockd.AuthError) as caught:
            await c.acquire("aio:auth", ttl=5.0)
        self.assertEqual(caught.exception.code, "NOAUTH")

    async def test_wrong_secret(self):
        c = self.client(secret="wrong")
        with self.assertRaises(redlockd.AuthError) as caught:
            await c.ping()
        self.assertEqual(caught.exception.code, "AUTH_FAILED")


class AioTlsTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="redlockd-py-aio-pki-")
        cls.pki = make_pki(Path(cls.tmp.name))
        # The daemon requires client certificates too (mutual TLS).
        cls.context = ssl.create_default_context(cafile=cls.pki["ca.crt"])
        cls.context.load_cert_chain(cls.pki["client.crt"], cls.pki["client.key"])
        cls.fleet = Fleet(5)
        try:
            cls.daemon = Daemon(cls.fleet.addresses, {"tls": {"cert_file": cls.pki["server.crt"],
                                                              "key_file": cls.pki["server.key"],
                                                              "client_ca_file": cls.pki["ca.crt"]}},
                                tls_context=cls.context)
        except BaseException:
            cls.fleet.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        cls.fleet.close()
        cls.tmp.cleanup()

    async def refused(self, **kwargs) -> redlockd.Unavailable:
        async with redlockd.aio.Client([self.daemon.address], connect_timeout=2.0, **kwargs) as c:
            with self.assertRaises(redlockd.Unavailable) as caught:
                await c.ping()
        return caught.exception

    async def test_lock_over_tls(self):
        async with redlockd.aio.Client([self.daemon.address], tls=self.context) as c:
            async with c.lock("aio:tls", ttl=5.0, keep=True) as lease:
                self.assertGreater(lease.fence, 0)
                self.assertEqual((await c.info())["keep_locks"], 1)

    async def test_no_client_certificate_is_refused(self):
        await self.refused(tls=ssl.create_default_context(cafile=self.pki["ca.crt"]))

    async def test_plaintext_client_is_refused(self):
        await self.refused()

    async def test_untrusted_certificate_is_refused(self):
        error = await self.refused(tls=True)  # the system's CAs
        self.assertIn("certificate", str(error).lower())


if __name__ == "__main__":
    unittest.main()
