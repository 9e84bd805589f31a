"""The Python client against real redis-server masters and the real redlockd binary."""

from __future__ import annotations

import os
import signal
import ssl
import tempfile
import threading
import time
import unittest
from pathlib import Path

import redlockd

from .harness import Daemon, Fleet, eventually, make_pki


class _FleetCase(unittest.TestCase):
    """Five masters and one daemon for the whole class."""

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

    def client(self, **kwargs) -> redlockd.Client:
        c = redlockd.Client([self.daemon.address], **kwargs)
        self.addCleanup(c.close)
        return c


class ProtocolTests(unittest.TestCase):
    """Request lines and reply parsing, without a daemon."""

    def test_status_fields_in_any_order(self):
        from redlockd import _protocol as proto

        parse = proto.parse_status
        self.assertEqual(parse("OK FREE", "r"), redlockd.Status(False, 0.0))
        self.assertEqual(parse("OK HELD 1500", "r"), redlockd.Status(True, 1.5))
        self.assertEqual(parse("OK HELD 29850 readers=1", "r"),
                         redlockd.Status(True, 29.85, readers=1))
        self.assertEqual(parse("OK FREE permits=1/3", "r"),
                         redlockd.Status(False, 0.0, permits_used=1, permits=3))
        self.assertEqual(parse("OK HELD 10 permits=2/2 readers=3 label=a=b", "r"),
                         redlockd.Status(True, 0.01, "a=b", 3, 2, 2))
        self.assertEqual(parse("OK HELD 10 future=1", "r"), redlockd.Status(True, 0.01))
        for bad in ("OK HELD", "OK HELD x", "OK FREE readers", "OK HELD 1 readers=x", "OK"):
            with self.assertRaises(redlockd.RedlockdError, msg=bad):
                parse(bad, "r")
        with self.assertRaises(redlockd.NoQuorum):
            parse("NOQUORUM 2 3", "r")

    def test_request_lines(self):
        from redlockd import _protocol as proto

        self.assertEqual(proto.lock_request("r", 1.5, 2.0, True, shared=True, label="h:1",
                                            max_hold=60.0),
                         "LOCK r 1500 SHARED WAIT 2000 KEEP LABEL h:1 MAXHOLD 60000")
        self.assertEqual(proto.lock_request("r", 1.0, None, False, permits=3),
                         "LOCK r 1000 PERMITS 3")
        self.assertEqual(proto.mlock_request(("a", "b"), 5.0, 0.0, False),
                         "MLOCK 2 a b 5000 WAIT 0")
        self.assertEqual(proto.munlock_request(["b", "a"], "0" * 40), f"MUNLOCK 2 b a {'0' * 40}")
        self.assertEqual(proto.mextend_request(["a"], "0" * 40, 1.0), f"MEXTEND 1 a {'0' * 40} 1000")
        self.assertEqual(proto.release_prefix(("a", "b"), True), "MUNLOCK 2 a b")
        self.assertEqual(proto.release_prefix(("a",), False), "UNLOCK a")
        self.assertIsInstance(proto.error_from_reply("ERR PERMITS_MISMATCH 2 permits are in force",
                                                     "r"), redlockd.PermitsMismatch)
        proto.check_protocol("redlockd 0.2.0 proto=1.1 nodes=5 quorum=3")
        with self.assertRaises(redlockd.ServerError):
            proto.check_protocol("redlockd 9 proto=2 nodes=5 quorum=3")


class LockTests(_FleetCase):
    def test_lock_and_unlock(self):
        c = self.client()
        with c.lock("py:basic", ttl=10.0) as lease:
            self.assertRegex(lease.owner, r"^[0-9a-f]{40}$")
            self.assertGreater(lease.fence, 0)
            self.assertGreater(lease.validity, 0.0)
            self.assertLessEqual(lease.validity, 10.0)
            with self.assertRaises(redlockd.LockBusy):
                c.acquire("py:basic", ttl=10.0)
        # Released at the end of the block: free again, with a larger fence.
        again = c.acquire("py:basic", ttl=10.0)
        self.assertGreater(again.fence, lease.fence)
        again.release()
        with self.assertRaises(redlockd.NotHeld):
            c.unlock("py:basic", again.owner)

    def test_released_when_the_block_raises(self):
        c = self.client()
        with self.assertRaises(ZeroDivisionError):
            with c.lock("py:raise", ttl=10.0):
                1 / 0
        c.acquire("py:raise", ttl=10.0).release()

    def test_busy_between_two_clients(self):
        a, b = self.client(), self.client()
        lease = a.acquire("py:busy", ttl=10.0)
        with self.assertRaises(redlockd.LockBusy) as caught:
            b.acquire("py:busy", ttl=10.0)
        self.assertGreater(caught.exception.retry_after, 0.0)
        lease.release()
        b.acquire("py:busy", ttl=10.0).release()

    def test_extend(self):
        c = self.client()
        lease = c.acquire("py:extend", ttl=1.0)
        validity = lease.extend(20.0)
        self.assertGreater(validity, 1.0)
        self.assertEqual(lease.validity, validity)
        lease.release()
        with self.assertRaises(redlockd.NotHeld):
            lease.extend(5.0)

    def test_status_hello_and_remaining(self):
        c = self.client()
        self.assertEqual(c.status("py:status"), redlockd.Status(held=False, remaining=0.0))
        lease = c.acquire("py:status", ttl=10.0)
        status = c.status("py:status")
        self.assertTrue(status.held)
        self.assertGreater(status.remaining, 5.0)
        self.assertLessEqual(status.remaining, 10.0)
        self.assertNotIn(lease.owner, repr(status))  # STATUS never names the owner
        self.assertGreater(lease.remaining(), 5.0)
        self.assertLessEqual(lease.remaining(), lease.validity)
        lease.release()
        self.assertFalse(c.status("py:status").held)
        self.assertRegex(c.hello(), r"^redlockd \S+ proto=1(\.1)? nodes=5 quorum=3$")
        with self.assertRaises(ValueError):
            c.status("two words")

    def test_list_and_status_label(self):
        c = self.client()
        lease = c.acquire("py:list:a", ttl=10.0)
        with c.lock("py:list:b", ttl=10.0, label="tester:1"):
            listing = c.list("py:list:")
            self.assertEqual([lock.resource for lock in listing.locks], ["py:list:a", "py:list:b"])
            self.assertFalse(listing.truncated)
            self.assertEqual(listing.locks[0].kind, "exclusive")
            self.assertEqual(listing.locks[0].labels, [])
            self.assertEqual(listing.locks[1].labels, ["tester:1"])
            self.assertGreater(listing.locks[1].remaining, 5.0)
            self.assertNotIn(lease.owner, repr(listing))
            self.assertEqual(c.status("py:list:b").label, "tester:1")
            self.assertIsNone(c.status("py:list:a").label)
            first = c.list("py:list:", count=1)
            self.assertEqual(len(first.locks), 1)
            self.assertTrue(first.truncated)
        lease.release()
        with self.assertRaises(ValueError):
            c.list("py:list:", count=0)
        for bad in ("", "two words", "x" * 65):
            with self.assertRaises(ValueError):
                c.acquire("py:list:c", ttl=1.0, label=bad)

    def test_max_hold_ends_a_keep_lock(self):
        c, other = self.client(), self.client()
        lost = threading.Event()
        lease = c.acquire("py:maxhold", ttl=1.0, keep=True, max_hold=0.5,
                          on_lost=lambda _: lost.set())
        self.assertTrue(lost.wait(10.0), "no LOST after MAXHOLD")
        self.assertIn("LOST", lease.lost_reason)
        self.assertTrue(eventually(lambda: _try_lock(other, "py:maxhold")))
        lease.release()  # reported lost: no NotHeld
        with self.assertRaises(ValueError):
            c.acquire("py:maxhold", ttl=1.0, max_hold=5.0)  # MAXHOLD needs KEEP

    def test_errors(self):
        c = self.client()
        with self.assertRaises(redlockd.ServerError) as caught:
            c.acquire("py:err", ttl=7200.0)  # above max_ttl_ms
        self.assertEqual(caught.exception.code, "BAD_TTL")
        with self.assertRaises(ValueError):
            c.acquire("two words", ttl=1.0)  # refused before it could inject a request
        with self.assertRaises(ValueError):
            c.acquire("a\nUNLOCK", ttl=1.0)
        with self.assertRaises(redlockd.NotHeld):
            c.unlock("py:err", "0" * 40)
        with self.assertRaises(redlockd.ServerError) as caught:
            c.unlock("py:err", "f" * 39 + "g")
        self.assertEqual(caught.exception.code, "BAD_OWNER")
        c.ping()  # the connection is still usable after errors

    def test_pipelined_calls_from_many_threads_share_one_connection(self):
        c = self.client()
        c.ping()
        before = self.daemon.info()["clients"]
        errors: list[BaseException] = []
        fences: list[int] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            try:
                for i in range(20):
                    with c.lock(f"py:pipe:{n}:{i % 3}", ttl=10.0) as lease:
                        with lock:
                            fences.append(lease.fence)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(fences), 16 * 20)
        self.assertEqual(len(set(fences)), len(fences))
        # No extra connection was opened. (Not "equal": a connection an earlier test closed may
        # still have been counted in `before`, the daemon sees the close a moment later.)
        self.assertLessEqual(self.daemon.info()["clients"], before)

    def test_wait_gets_the_lock_when_the_holder_releases(self):
        holder, waiter = self.client(), self.client()
        lease = holder.acquire("py:wait", ttl=30.0)
        result: dict = {}

        def wait_for_it() -> None:
            try:
                result["lease"] = waiter.acquire("py:wait", ttl=10.0, wait=30.0)
            except BaseException as error:  # noqa: BLE001
                result["error"] = error

        t = threading.Thread(target=wait_for_it)
        t.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1),
                        "the waiter was never queued")
        lease.release()
        t.join(20.0)
        self.assertFalse(t.is_alive())
        self.assertNotIn("error", result)
        self.assertGreater(result["lease"].fence, lease.fence)
        result["lease"].release()

    def test_unlock_behind_a_wait_on_the_same_connection(self):
        # The UNLOCK is pipelined behind the waiting LOCK: the daemon runs it at once, which
        # grants the waiter, and the replies come back in order.
        c = self.client()
        lease = c.acquire("py:same-conn", ttl=30.0)
        result: dict = {}
        t = threading.Thread(target=lambda: result.setdefault(
            "lease", c.acquire("py:same-conn", ttl=10.0, wait=30.0)))
        t.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1))
        lease.release()
        t.join(20.0)
        self.assertFalse(t.is_alive())
        self.assertGreater(result["lease"].fence, lease.fence)
        result["lease"].release()

    def test_wait_that_runs_out_is_busy(self):
        c = self.client()
        lease = c.acquire("py:wait-out", ttl=30.0)
        with self.assertRaises(redlockd.LockBusy):
            c.acquire("py:wait-out", ttl=10.0, wait=0.2)
        lease.release()

    def test_keep_is_renewed_past_its_ttl(self):
        c, other = self.client(), self.client()
        lost = threading.Event()
        ttl = 1.0
        start = time.monotonic()
        lease = c.acquire("py:keep", ttl=ttl, keep=True, on_lost=lambda _: lost.set())
        renewed_before = self.daemon.info()["counters"]["renewed"]
        # Until three TTLs have passed and the daemon has renewed it several times.
        self.assertTrue(eventually(
            lambda: time.monotonic() - start > 3 * ttl
            and self.daemon.info()["counters"]["renewed"] >= renewed_before + 4, 30.0))
        with self.assertRaises(redlockd.LockBusy):
            other.acquire("py:keep", ttl=1.0)
        self.assertFalse(lease.lost.is_set())
        lease.release()  # raises NotHeld if the renewals had not kept it
        self.assertFalse(lost.is_set())
        other.acquire("py:keep", ttl=1.0).release()

    def test_keep_is_released_when_the_client_closes(self):
        c, other = redlockd.Client([self.daemon.address]), self.client()
        lease = c.acquire("py:keep-close", ttl=30.0, keep=True)
        c.close()
        self.assertTrue(lease.lost.wait(10.0))
        self.assertTrue(eventually(lambda: _try_lock(other, "py:keep-close")))


def _raised(call) -> BaseException | None:
    try:
        call()
    except BaseException as error:  # noqa: BLE001 - returned to the test
        return error
    return None


def _try_lock(client: redlockd.Client, resource: str) -> bool:
    try:
        client.acquire(resource, ttl=1.0).release()
        return True
    except redlockd.LockBusy:
        return False


class LostTests(_FleetCase):
    def test_lost_when_three_masters_die(self):
        c = self.client()
        called = threading.Event()
        seen = []

        def on_lost(lease):
            seen.append(lease)
            called.set()

        lease = c.acquire("py:lost", ttl=1.0, keep=True, on_lost=on_lost)
        # A WAIT pending on the same connection: the LOST push arrives before its reply and must
        # not be taken for it.
        other = self.client()
        other.acquire("py:lost-held", ttl=30.0)
        waited: dict = {}
        waiter = threading.Thread(target=lambda: waited.update(
            error=_raised(lambda: c.acquire("py:lost-held", ttl=1.0, wait=3.0))))
        waiter.start()
        self.assertTrue(eventually(lambda: self.daemon.info()["waiters"] == 1))
        for i in range(3):
            self.fleet.kill(i)
        self.assertTrue(lease.lost.wait(20.0), "no LOST within 20 s of killing three masters")
        waiter.join(30.0)
        self.assertIsInstance(waited.get("error"), (redlockd.LockBusy, redlockd.NoQuorum))
        self.assertTrue(called.wait(5.0))
        self.assertIs(seen[0], lease)
        self.assertIn("LOST", lease.lost_reason)
        self.assertEqual(lease.remaining(), 0.0)
        lease.release()  # already reported lost: no NotHeld
        with self.assertRaises(redlockd.NoQuorum) as caught:
            c.acquire("py:lost-2", ttl=1.0)
        self.assertEqual(caught.exception.needed, 3)
        with self.assertRaises(redlockd.NoQuorum):
            c.status("py:lost-2")


class FailoverTests(unittest.TestCase):
    def setUp(self):
        self.fleet = Fleet(5)
        self.addCleanup(self.fleet.close)
        self.first = Daemon(self.fleet.addresses)
        self.addCleanup(self.first.close)
        self.second = Daemon(self.fleet.addresses)
        self.addCleanup(self.second.close)

    def test_fails_over_and_keep_locks_are_lost(self):
        c = redlockd.Client([self.first.address, self.second.address])
        self.addCleanup(c.close)
        kept = c.acquire("py:fo-keep", ttl=30.0, keep=True)
        plain = c.acquire("py:fo-plain", ttl=30.0)
        self.assertEqual(c.address, self.first.address)
        self.first.kill()
        self.assertTrue(kept.lost.wait(10.0), "the KEEP lease was not reported lost")
        self.assertIn("connection", kept.lost_reason)
        with c.lock("py:fo-new", ttl=10.0) as lease:
            self.assertGreater(lease.fence, plain.fence)
        self.assertEqual(c.address, self.second.address)
        plain.release()  # a plain lease survives the failover: the second daemon releases it

    def test_fails_over_from_a_hung_daemon(self):
        c = redlockd.Client([self.first.address, self.second.address], timeout=2.0)
        self.addCleanup(c.close)
        kept = c.acquire("py:hung", ttl=30.0, keep=True)
        os.kill(self.first.proc.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, self.first.proc.pid, signal.SIGCONT)
        with self.assertRaises(redlockd.ConnectionLost) as caught:
            c.ping()
        self.assertIn("no reply", str(caught.exception))
        self.assertTrue(kept.lost.is_set())
        c.ping()
        self.assertEqual(c.address, self.second.address)

    def test_a_reply_behind_a_long_wait_is_not_a_hang(self):
        # The PING's reply comes after the WAIT's, later than `timeout` after it was sent.
        holder = redlockd.Client([self.first.address])
        self.addCleanup(holder.close)
        c = redlockd.Client([self.first.address], timeout=2.0)
        self.addCleanup(c.close)
        lease = holder.acquire("py:hol", ttl=30.0)
        result: dict = {}

        def wait() -> None:
            try:
                c.acquire("py:hol", ttl=1.0, wait=4.0)
            except BaseException as error:  # noqa: BLE001
                result["error"] = error

        t = threading.Thread(target=wait)
        t.start()
        self.assertTrue(eventually(lambda: self.first.info()["waiters"] == 1))
        c.ping()
        t.join()
        self.assertIsInstance(result.get("error"), redlockd.LockBusy)
        lease.release()

    def test_skips_a_dead_first_address(self):
        self.first.kill()
        c = redlockd.Client([self.first.address, self.second.address])
        self.addCleanup(c.close)
        c.acquire("py:fo-dead", ttl=10.0).release()
        self.assertEqual(c.address, self.second.address)

    def test_unavailable_when_every_daemon_is_down(self):
        self.first.kill()
        self.second.kill()
        c = redlockd.Client([self.first.address, self.second.address], connect_timeout=2.0)
        self.addCleanup(c.close)
        with self.assertRaises(redlockd.Unavailable):
            c.ping()


class AuthTests(_FleetCase):
    secret = "c0rrect-h0rse"
    daemon_env = {"REDLOCKD_CLIENT_SECRET": "c0rrect-h0rse"}

    def test_right_secret(self):
        c = self.client(secret="c0rrect-h0rse")
        with c.lock("py:auth", ttl=5.0) as lease:
            self.assertGreater(lease.fence, 0)

    def test_no_secret(self):
        c = self.client()
        with self.assertRaises(redlockd.AuthError) as caught:
            c.acquire("py:auth", ttl=5.0)
        self.assertEqual(caught.exception.code, "NOAUTH")

    def test_wrong_secret(self):
        c = self.client(secret="wrong")
        with self.assertRaises(redlockd.AuthError) as caught:
            c.ping()
        self.assertEqual(caught.exception.code, "AUTH_FAILED")


class TlsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="redlockd-py-pki-")
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

    def test_lock_over_tls(self):
        c = redlockd.Client([self.daemon.address], tls=self.context)
        self.addCleanup(c.close)
        with c.lock("py:tls", ttl=5.0, keep=True) as lease:
            self.assertGreater(lease.fence, 0)
            self.assertEqual(c.info()["keep_locks"], 1)

    def test_no_client_certificate_is_refused(self):
        context = ssl.create_default_context(cafile=self.pki["ca.crt"])
        c = redlockd.Client([self.daemon.address], tls=context, connect_timeout=2.0)
        self.addCleanup(c.close)
        with self.assertRaises(redlockd.Unavailable):
            c.ping()

    def test_plaintext_client_is_refused(self):
        c = redlockd.Client([self.daemon.address], connect_timeout=2.0)
        self.addCleanup(c.close)
        with self.assertRaises(redlockd.Unavailable):
            c.ping()

    def test_untrusted_certificate_is_refused(self):
        c = redlockd.Client([self.daemon.address], tls=True, connect_timeout=2.0)  # system CAs
        self.addCleanup(c.close)
        with self.assertRaises(redlockd.Unavailable) as caught:
            c.ping()
        self.assertIn("certificate", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
