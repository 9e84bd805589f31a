// The Node client against real redis-server masters and the real redlockd binary.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";

import {
  AuthError,
  Client,
  ConnectionLostError,
  LockBusyError,
  LockLostError,
  NoQuorumError,
  NotHeldError,
  ServerError,
  UnavailableError,
} from "../index.js";
import { Daemon, Fleet, eventually, makePki } from "../testing/harness.js";

function clients() {
  const made = [];
  return {
    make(addresses, options) {
      const c = new Client(addresses, options);
      made.push(c);
      return c;
    },
    closeAll() {
      for (const c of made) c.close();
    },
  };
}

describe("with one daemon", () => {
  let fleet;
  let daemon;
  const cs = clients();
  before(async () => {
    fleet = await Fleet.start(5);
    daemon = await Daemon.start(fleet.addresses);
  });
  after(async () => {
    cs.closeAll();
    await daemon?.close();
    await fleet?.close();
  });

  test("lock, busy, extend and unlock", async () => {
    const a = cs.make([daemon.address]);
    const b = cs.make(daemon.address);
    const lease = await a.acquire("node:basic", { ttl: 10000 });
    assert.match(lease.owner, /^[0-9a-f]{40}$/);
    assert.equal(typeof lease.fence, "bigint");
    assert.ok(lease.fence > 0n);
    assert.ok(lease.validity > 0 && lease.validity <= 10000);
    await assert.rejects(b.acquire("node:basic", { ttl: 10000 }), (e) => e instanceof LockBusyError && e.retryAfter > 0);
    assert.ok((await lease.extend(20000)) > 10000);
    await a.release(lease);
    await assert.rejects(a.unlock("node:basic", lease.owner), NotHeldError);
    const again = await b.acquire("node:basic", { ttl: 10000 });
    assert.ok(again.fence > lease.fence);
    await again.release();
  });

  test("using releases the lock, also when the function throws", async () => {
    const c = cs.make([daemon.address]);
    const result = await c.using("node:using", { ttl: 10000, wait: 5000 }, async (lease) => {
      assert.equal(lease.signal.aborted, false);
      return lease.fence;
    });
    assert.equal(typeof result, "bigint");
    await assert.rejects(
      c.using("node:using", { ttl: 10000 }, async () => {
        throw new RangeError("boom");
      }),
      RangeError,
    );
    (await c.acquire("node:using", { ttl: 1000 })).release();
  });

  test("list and the status label", async () => {
    const c = cs.make([daemon.address]);
    const lease = await c.acquire("node:list:a", { ttl: 10000 });
    const labelled = await c.acquire("node:list:b", { ttl: 10000, label: "tester:1" });
    const listing = await c.list("node:list:");
    assert.deepEqual(
      listing.locks.map((l) => [l.resource, l.kind, l.labels]),
      [
        ["node:list:a", "exclusive", []],
        ["node:list:b", "exclusive", ["tester:1"]],
      ],
    );
    assert.equal(listing.truncated, false);
    assert.ok(listing.locks[1].remaining > 5000 && listing.locks[1].remaining <= 10000);
    assert.ok(!JSON.stringify(listing).includes(lease.owner));
    assert.equal((await c.status("node:list:b")).label, "tester:1");
    assert.equal((await c.status("node:list:a")).label, undefined);
    const first = await c.list("node:list:", { count: 1 });
    assert.equal(first.locks.length, 1);
    assert.equal(first.truncated, true);
    await assert.rejects(c.list("node:list:", { count: 0 }), RangeError);
    for (const label of ["", "two words", "x".repeat(65), 7]) {
      await assert.rejects(c.acquire("node:list:c", { ttl: 1000, label }), TypeError);
    }
    await labelled.release();
    await lease.release();
  });

  test("maxHold ends a KEEP lock with LOST", async () => {
    const c = cs.make([daemon.address]);
    const lease = await c.acquire("node:maxhold", { ttl: 1000, keep: true, maxHold: 500 });
    assert.ok(await eventually(() => lease.signal.aborted, 10000), "no LOST after MAXHOLD");
    assert.match(lease.signal.reason.message, /LOST/);
    await lease.release(); // reported lost: no NotHeldError
    await assert.rejects(c.acquire("node:maxhold", { ttl: 1000, maxHold: 5000 }), TypeError);
  });

  test("status, hello, remaining, and disposal (await using) releases and closes", async () => {
    const c = cs.make([daemon.address]);
    assert.deepEqual(await c.status("node:status"), { held: false, remaining: 0 });
    const lease = await c.acquire("node:status", { ttl: 10000 });
    const held = await c.status("node:status");
    assert.equal(held.held, true);
    assert.ok(held.remaining > 5000 && held.remaining <= 10000, `remaining ${held.remaining}`);
    assert.ok(!JSON.stringify(held).includes(lease.owner)); // STATUS never names the owner
    assert.ok(lease.remaining() > 5000 && lease.remaining() <= lease.validity);
    assert.match(await c.hello(), /^redlockd \S+ proto=1(\.1)? nodes=5 quorum=3$/);
    // What `await using lease = ...` calls at the end of its scope.
    await lease[Symbol.asyncDispose]();
    assert.deepEqual(await c.status("node:status"), { held: false, remaining: 0 });
    await assert.rejects(c.status("two words"), TypeError);
    const disposable = new Client([daemon.address]);
    const kept = await disposable.acquire("node:dispose", { ttl: 30000, keep: true });
    await disposable[Symbol.asyncDispose](); // closes: the daemon releases its KEEP locks
    assert.ok(await eventually(() => kept.lost, 10000));
    assert.ok(await eventually(async () => !(await c.status("node:dispose")).held, 10000));
  });

  test("errors", async () => {
    const c = cs.make([daemon.address]);
    await assert.rejects(c.acquire("node:err", { ttl: 7_200_000 }), (e) => e instanceof ServerError && e.code === "BAD_TTL");
    await assert.rejects(c.acquire("two words", { ttl: 1000 }), TypeError);
    await assert.rejects(c.acquire("a\nUNLOCK", { ttl: 1000 }), TypeError);
    await assert.rejects(c.unlock("node:err", "0".repeat(40)), NotHeldError);
    await assert.rejects(c.unlock("node:err", "f".repeat(39) + "g"), (e) => e instanceof ServerError && e.code === "BAD_OWNER");
    await c.ping();
  });

  test("concurrent calls are pipelined on one connection", async () => {
    const c = cs.make([daemon.address]);
    await c.ping();
    const clientsBefore = (await daemon.info()).clients;
    const fences = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const lease = await c.acquire(`node:pipe:${i}`, { ttl: 10000 });
        await lease.release();
        return lease.fence;
      }),
    );
    assert.equal(new Set(fences).size, 200);
    assert.equal((await daemon.info()).clients, clientsBefore);
  });

  test("WAIT gets the lock when the holder releases; a WAIT that runs out is busy", async () => {
    const holder = cs.make([daemon.address]);
    const waiter = cs.make([daemon.address]);
    const lease = await holder.acquire("node:wait", { ttl: 30000 });
    const waiting = waiter.acquire("node:wait", { ttl: 10000, wait: 30000 });
    assert.ok(await eventually(async () => (await daemon.info()).waiters === 1), "the waiter was never queued");
    await lease.release();
    const won = await waiting;
    assert.ok(won.fence > lease.fence);
    await assert.rejects(holder.acquire("node:wait", { ttl: 1000, wait: 200 }), LockBusyError);
    await won.release();
  });

  test("an aborted WAIT is consumed and the lock it was granted is released", async () => {
    const holder = cs.make([daemon.address]);
    const waiter = cs.make([daemon.address]);
    const third = cs.make([daemon.address]);
    const lease = await holder.acquire("node:abort", { ttl: 30000 });
    const controller = new AbortController();
    const waiting = waiter.acquire("node:abort", { ttl: 60000, wait: 30000, signal: controller.signal });
    assert.ok(await eventually(async () => (await daemon.info()).waiters === 1), "the waiter was never queued");
    controller.abort(new Error("gave up"));
    await assert.rejects(waiting, /gave up/);
    const acquired = (await daemon.info()).counters.acquired;
    await lease.release(); // the daemon now grants the lock to the abandoned WAIT
    assert.ok(
      await eventually(async () => {
        await (await third.acquire("node:abort", { ttl: 1000 })).release();
        return true;
      }),
      "the lock granted to the aborted waiter was not released",
    );
    assert.ok((await daemon.info()).counters.acquired >= acquired + 2, "the aborted WAIT was never granted: the test proved nothing");
    await waiter.ping(); // the abandoned reply was consumed in its turn
  });

  test("KEEP is renewed past its TTL", async () => {
    const c = cs.make([daemon.address]);
    const other = cs.make([daemon.address]);
    const ttl = 1000;
    const start = Date.now();
    const lease = await c.acquire("node:keep", { ttl, keep: true });
    const renewed = (await daemon.info()).counters.renewed;
    assert.ok(
      await eventually(async () => Date.now() - start > 3 * ttl && (await daemon.info()).counters.renewed >= renewed + 4, 30000),
      "not renewed",
    );
    await assert.rejects(other.acquire("node:keep", { ttl: 1000 }), LockBusyError);
    assert.equal(lease.signal.aborted, false);
    await lease.release(); // NotHeldError if the renewals had not kept it
  });

  test("a plain lease's signal aborts when its validity runs out", async () => {
    const c = cs.make([daemon.address]);
    const lease = await c.acquire("node:expire", { ttl: 100 });
    assert.ok(await eventually(() => lease.signal.aborted, 10000));
    assert.ok(lease.signal.reason instanceof LockLostError);
  });
});

describe("LOST", () => {
  let fleet;
  let daemon;
  const cs = clients();
  before(async () => {
    fleet = await Fleet.start(5);
    daemon = await Daemon.start(fleet.addresses);
  });
  after(async () => {
    cs.closeAll();
    await daemon?.close();
    await fleet?.close();
  });

  test("a KEEP lease's signal aborts when three masters die", async () => {
    const c = cs.make([daemon.address]);
    const lease = await c.acquire("node:lost", { ttl: 1000, keep: true });
    const aborted = new Promise((resolve) => lease.signal.addEventListener("abort", resolve));
    // A WAIT pending on the same connection: the LOST push arrives before its reply and must
    // not be taken for it.
    await cs.make([daemon.address]).acquire("node:lost-held", { ttl: 30000 });
    const waiting = c.acquire("node:lost-held", { ttl: 1000, wait: 3000 });
    waiting.catch(() => {});
    assert.ok(await eventually(async () => (await daemon.info()).waiters === 1), "the waiter was never queued");
    for (let i = 0; i < 3; i++) await fleet.kill(i);
    assert.ok(await eventually(() => lease.signal.aborted, 20000), "no LOST within 20 s of killing three masters");
    await assert.rejects(waiting, (e) => e instanceof LockBusyError || e instanceof NoQuorumError);
    await aborted;
    assert.ok(lease.signal.reason instanceof LockLostError);
    assert.match(lease.signal.reason.message, /LOST/);
    await lease.release(); // already reported: no NotHeldError
    await assert.rejects(c.acquire("node:lost2", { ttl: 1000 }), (e) => e instanceof NoQuorumError && e.needed === 3);
    await assert.rejects(c.status("node:lost2"), NoQuorumError);
  });
});

describe("failover", () => {
  let fleet;
  let first;
  let second;
  const cs = clients();
  before(async () => {
    fleet = await Fleet.start(5);
    first = await Daemon.start(fleet.addresses);
    second = await Daemon.start(fleet.addresses);
  });
  after(async () => {
    cs.closeAll();
    await first?.close();
    await second?.close();
    await fleet?.close();
  });

  test("fails over to the next daemon; KEEP leases are lost, plain ones survive", async () => {
    const c = cs.make([first.address, second.address]);
    const kept = await c.acquire("node:fo-keep", { ttl: 30000, keep: true });
    const plain = await c.acquire("node:fo-plain", { ttl: 30000 });
    assert.equal(c.address, first.address);
    await first.kill();
    assert.ok(await eventually(() => kept.signal.aborted), "the KEEP lease was not reported lost");
    assert.match(kept.signal.reason.message, /connection/);
    const lease = await c.acquire("node:fo-new", { ttl: 10000 });
    assert.equal(c.address, second.address);
    assert.ok(lease.fence > plain.fence);
    await plain.release(); // through the second daemon
    await lease.release();

    const fresh = cs.make([first.address, second.address]);
    await fresh.ping();
    assert.equal(fresh.address, second.address);
    await second.kill();
    const none = cs.make([first.address, second.address], { connectTimeout: 2000 });
    await assert.rejects(none.ping(), UnavailableError);
  });
});

describe("a hung daemon", () => {
  let fleet;
  let first;
  let second;
  const cs = clients();
  before(async () => {
    fleet = await Fleet.start(5);
    first = await Daemon.start(fleet.addresses);
    second = await Daemon.start(fleet.addresses);
  });
  after(async () => {
    cs.closeAll();
    first?.proc.child.kill("SIGCONT");
    await first?.close();
    await second?.close();
    await fleet?.close();
  });

  test("a reply behind a long WAIT is not late", async () => {
    const holder = cs.make([first.address]);
    const c = cs.make([first.address], { requestTimeout: 2000 });
    const lease = await holder.acquire("node:hol", { ttl: 30000 });
    const waiting = c.acquire("node:hol", { ttl: 1000, wait: 4000 });
    assert.ok(await eventually(async () => (await first.info()).waiters === 1), "the waiter was never queued");
    await c.ping(); // its reply comes after the WAIT's, 4 s later
    await assert.rejects(waiting, LockBusyError);
    await lease.release();
  });

  test("is a connection failure: KEEP leases are lost, the next call fails over", async () => {
    const c = cs.make([first.address, second.address], { requestTimeout: 2000 });
    const kept = await c.acquire("node:hung", { ttl: 30000, keep: true });
    first.proc.child.kill("SIGSTOP");
    await assert.rejects(c.ping(), (e) => e instanceof ConnectionLostError && /no reply/.test(e.message));
    assert.ok(kept.signal.aborted);
    await c.ping();
    assert.equal(c.address, second.address);
  });
});

describe("AUTH", () => {
  let fleet;
  let daemon;
  const cs = clients();
  before(async () => {
    fleet = await Fleet.start(5);
    daemon = await Daemon.start(fleet.addresses, { env: { REDLOCKD_CLIENT_SECRET: "c0rrect-h0rse" }, secret: "c0rrect-h0rse" });
  });
  after(async () => {
    cs.closeAll();
    await daemon?.close();
    await fleet?.close();
  });

  test("the right secret, none, a wrong one", async () => {
    const good = cs.make([daemon.address], { secret: "c0rrect-h0rse" });
    await (await good.acquire("node:auth", { ttl: 5000 })).release();
    const none = cs.make([daemon.address]);
    await assert.rejects(none.acquire("node:auth", { ttl: 5000 }), (e) => e instanceof AuthError && e.code === "NOAUTH");
    const wrong = cs.make([daemon.address], { secret: "wrong" });
    await assert.rejects(wrong.ping(), (e) => e instanceof AuthError && e.code === "AUTH_FAILED");
  });
});

describe("TLS", () => {
  let fleet;
  let daemon;
  let pki;
  const cs = clients();
  before(async () => {
    pki = makePki();
    fleet = await Fleet.start(5);
    // The daemon requires client certificates too (mutual TLS).
    daemon = await Daemon.start(fleet.addresses, {
      extra: { tls: { cert_file: pki.cert, key_file: pki.key, client_ca_file: pki.ca } },
      tls: { ca: fs.readFileSync(pki.ca), cert: fs.readFileSync(pki.clientCert), key: fs.readFileSync(pki.clientKey) },
    });
  });
  after(async () => {
    cs.closeAll();
    await daemon?.close();
    await fleet?.close();
    if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
  });

  test("lock over TLS; an unknown CA, no client certificate and plaintext are refused", async () => {
    const ca = fs.readFileSync(pki.ca);
    const c = cs.make([daemon.address], { tls: { ca, cert: fs.readFileSync(pki.clientCert), key: fs.readFileSync(pki.clientKey) } });
    const lease = await c.acquire("node:tls", { ttl: 5000, keep: true });
    assert.equal((await c.info()).keep_locks, 1);
    await lease.release();
    const untrusted = cs.make([daemon.address], { tls: true, connectTimeout: 2000 });
    await assert.rejects(untrusted.ping(), (e) => e instanceof UnavailableError && /certificate/i.test(e.message));
    await assert.rejects(cs.make([daemon.address], { tls: { ca }, connectTimeout: 2000 }).ping(), UnavailableError);
    await assert.rejects(cs.make([daemon.address], { connectTimeout: 2000 }).ping(), UnavailableError);
  });
});
