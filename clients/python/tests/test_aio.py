"""The asyncio client against real redis-server masters and the real redlockd binary."""

from __future__ import annotations

import asyncio
import os
import signal
import unittest

import redlockd
import redlockd.aio

from .harness import Daemon, Fleet, eventually


class AioTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(5)
        try:
            cls.first = Daemon(cls.fleet.addresses)
        except BaseException:
            cls.fleet.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.first.close()
        cls.fleet.close()

    async def asyncSetUp(self):
        self.clients = []

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()

    def client(self, addresses=None, **kwargs) -> redlockd.aio.Client:
        c = redlockd.aio.Client(addresses or [self.first.address], **kwargs)
        self.clients.append(c)
        return c

    async def test_lock_busy_unlock(self):
        a, b = self.client(), self.client()
        async with a.lock("aio:basic", ttl=10.0) as lease:
            self.assertRegex(lease.owner, r"^[0-9a-f]{40}$")
            with self.assertRaises(redlockd.LockBusy):
                await b.acquire("aio:basic", ttl=10.0)
            self.assertGreater(await lease.extend(20.0), 10.0)
        again = await b.acquire("aio:basic", ttl=10.0)
        self.assertGreater(again.fence, lease.fence)
        await again.release()
        with self.assertRaises(redlockd.NotHeld):
            await a.unlock("aio:basic", again.owner)

    async def test_concurrent_calls_are_pipelined(self):
        c = self.client()
        await c.ping()
        before = (await asyncio.to_thread(self.first.info))["clients"]

        async def cycle(i: int) -> int:
            async with c.lock(f"aio:pipe:{i}", ttl=10.0) as lease:
                return lease.fence

        fences = await asyncio.gather(*(cycle(i) for i in range(200)))
        self.assertEqual(len(set(fences)), 200)
        self.assertEqual((await asyncio.to_thread(self.first.info))["clients"], before)

    async def test_cancelled_wait_releases_what_it_is_granted(self):
        holder, waiter, third = self.client(), self.client(), self.client()
        lease = await holder.acquire("aio:cancel", ttl=30.0)
        task = asyncio.ensure_future(waiter.acquire("aio:cancel", ttl=60.0, wait=30.0))
        self.assertTrue(await asyncio.to_thread(
            eventually, lambda: self.first.info()["waiters"] == 1))
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        acquired = (await asyncio.to_thread(self.first.info))["counters"]["acquired"]
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
        info = await asyncio.to_thread(self.first.info)
        self.assertGreaterEqual(info["counters"]["acquired"], acquired + 2)
        await waiter.ping()


class AioFailoverTests(unittest.IsolatedAsyncioTestCase):
    # Its own fleet, both daemons started before any lock: a daemon started later on masters
    # younger than the longest TTL granted on them quarantines them (restart protection).
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(5)
        try:
            cls.first = Daemon(cls.fleet.addresses)
            cls.second = Daemon(cls.fleet.addresses)
        except BaseException:
            cls.fleet.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.first.close()
        cls.second.close()
        cls.fleet.close()

    async def asyncSetUp(self):
        self.clients = []

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()

    def client(self, addresses, **kwargs) -> redlockd.aio.Client:
        c = redlockd.aio.Client(addresses, **kwargs)
        self.clients.append(c)
        return c

    async def test_failover_loses_keep_leases(self):
        first, second = self.first, self.second
        c = self.client([first.address, second.address])
        lost = asyncio.Event()
        kept = await c.acquire("aio:fo", ttl=30.0, keep=True, on_lost=lambda _: lost.set())
        plain = await c.acquire("aio:fo-plain", ttl=30.0)
        first.kill()
        await asyncio.wait_for(lost.wait(), 10.0)
        self.assertTrue(kept.lost.is_set())
        async with c.lock("aio:fo-new", ttl=10.0) as lease:
            self.assertGreater(lease.fence, plain.fence)
        self.assertEqual(c.address, second.address)
        await plain.release()

    async def test_hung_daemon_is_a_connection_failure(self):
        # Runs after the failover test (alphabetical order) and stops the second daemon.
        c = self.client([self.second.address], timeout=2.0)
        kept = await c.acquire("aio:hung", ttl=30.0, keep=True)
        os.kill(self.second.proc.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, self.second.proc.pid, signal.SIGCONT)
        with self.assertRaises(redlockd.ConnectionLost) as caught:
            await c.ping()
        self.assertIn("no reply", str(caught.exception))
        self.assertTrue(kept.lost.is_set())
