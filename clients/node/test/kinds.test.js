// The lock family of protocol 1.1 (SHARED, PERMITS, MLOCK) through the Node client, against real
// redis-server masters and the real redlockd binary. A daemon that does not say proto=1.1 fails
// every test here, saying so.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, Kind, LockBusyError, NotHeldError, PermitsMismatchError, ServerError } from "../index.js";
import { Daemon, Fleet, eventually } from "../testing/harness.js";

async function requireKinds(daemon) {
  const c = new Client([daemon.address]);
  try {
    const hello = await c.hello();
    if (!hello.split(" ").includes("proto=1.1")) {
      throw new Error(
        `the daemon at ${daemon.address} does not serve the lock family (HELLO: ${hello}, protocol 1.1 needed): ` +
          "build redlockd from a tree where SHARED, PERMITS and MLOCK are served",
      );
    }
  } finally {
    c.close();
  }
}

async function busy(promise) {
  try {
    await (await promise).release();
    return false;
  } catch (error) {
    if (error instanceof LockBusyError) return true;
    throw error;
  }
}

describe("the lock family (protocol 1.1)", () => {
  let fleet;
  let daemon;
  const made = [];
  const client = () => {
    const c = new Client([daemon.address]);
    made.push(c);
    return c;
  };
  before(async () => {
    fleet = await Fleet.start(5);
    daemon = await Daemon.start(fleet.addresses);
    await requireKinds(daemon);
  });
  after(async () => {
    for (const c of made) c.close();
    await daemon?.close();
    await fleet?.close();
  });

  test("shared holds share and exclude writers; STATUS counts readers", async () => {
    const [a, b, writer] = [client(), client(), client()];
    const first = await a.acquire("node:rw", { ttl: 10000, shared: true });
    const second = await b.acquire("node:rw", { ttl: 10000, shared: true, label: "reader:2" });
    for (const lease of [first, second]) {
      assert.equal(lease.kind, Kind.SHARED);
      assert.match(lease.owner, /^00001000[0-9a-f]{32}$/);
    }
    assert.ok(second.fence > first.fence);
    await assert.rejects(writer.acquire("node:rw", { ttl: 10000 }), LockBusyError);
    const status = await writer.status("node:rw");
    assert.equal(status.held, true);
    assert.equal(status.readers, 2);
    assert.ok(!JSON.stringify(status).includes(first.owner));
    assert.ok((await first.extend(20000)) > 10000);
    await first.release();
    await second.release();
    await writer.using("node:rw", { ttl: 10000 }, async (exclusive) => {
      assert.ok(exclusive.fence > second.fence);
      await assert.rejects(a.acquire("node:rw", { ttl: 1000, shared: true }), LockBusyError);
    });
    assert.deepEqual(await writer.status("node:rw"), { held: false, remaining: 0 });
  });

  test("a waiting writer is not starved by new readers", async () => {
    const [reader, writer, late] = [client(), client(), client()];
    const held = await reader.acquire("node:rw-intent", { ttl: 30000, shared: true });
    const waiting = writer.acquire("node:rw-intent", { ttl: 10000, wait: 30000 });
    assert.ok(await eventually(async () => (await daemon.info()).waiters === 1), "the writer was never queued");
    assert.ok(await eventually(() => busy(late.acquire("node:rw-intent", { ttl: 1000, shared: true }))), "a reader got in ahead of a waiting writer");
    await held.release();
    const won = await waiting;
    assert.equal(won.kind, Kind.EXCLUSIVE);
    await won.release();
    await (await late.acquire("node:rw-intent", { ttl: 1000, shared: true })).release();
  });

  test("permits: at most n, PERMITS_MISMATCH, a waiter gets the released permit", async () => {
    const [a, b, c] = [client(), client(), client()];
    const first = await a.acquire("node:pool", { ttl: 10000, permits: 2 });
    const second = await b.semaphore("node:pool", 2, { ttl: 10000 });
    for (const permit of [first, second]) {
      assert.equal(permit.kind, Kind.PERMIT);
      assert.equal(permit.permits, 2);
      assert.match(permit.owner, /^00002[0-9a-f]{35}$/);
    }
    assert.deepEqual(new Set([first.slot, second.slot]), new Set([0, 1]));
    await assert.rejects(c.semaphore("node:pool", 2, { ttl: 10000 }), LockBusyError);
    const status = await c.status("node:pool");
    assert.equal(status.held, false, "a semaphore and a lock of the same name are different things");
    assert.equal(status.permitsUsed, 2);
    assert.equal(status.permits, 2);
    await assert.rejects(c.semaphore("node:pool", 3, { ttl: 10000 }), (e) => e instanceof PermitsMismatchError && e instanceof ServerError && e.code === "PERMITS_MISMATCH");
    await assert.rejects(c.semaphore("node:pool", 0, { ttl: 1000 }), RangeError);
    await assert.rejects(c.acquire("node:pool", { ttl: 1000, permits: 2, shared: true }), TypeError);

    const controller = new AbortController();
    const waiting = c.semaphore("node:pool", 2, { ttl: 10000, wait: 30000, signal: controller.signal });
    assert.ok(await eventually(async () => (await daemon.info()).waiters === 1), "the permit waiter was never queued");
    await first.release();
    const third = await waiting;
    assert.equal(third.slot, first.slot);
    await third.release();
    await second.release();
    assert.deepEqual(await c.status("node:pool"), { held: false, remaining: 0 });
  });

  test("acquireMany: all or nothing, MEXTEND, MUNLOCK of some, usingMany", async () => {
    const [a, b] = [client(), client()];
    const lease = await a.acquireMany(["node:acct:1", "node:acct:2"], { ttl: 10000, label: "transfer" });
    assert.equal(lease.kind, Kind.SET);
    assert.deepEqual(lease.resources, ["node:acct:1", "node:acct:2"]);
    assert.equal(lease.resource, "node:acct:1");
    assert.match(lease.owner, /^00003000[0-9a-f]{32}$/);
    for (const resource of lease.resources) {
      await assert.rejects(b.acquire(resource, { ttl: 1000 }), LockBusyError);
      assert.equal((await b.status(resource)).label, "transfer");
    }
    await assert.rejects(b.acquireMany(["node:acct:3", "node:acct:2"], { ttl: 1000 }), LockBusyError);
    assert.equal((await b.status("node:acct:3")).held, false, "a refused set holds nothing");
    assert.ok((await lease.extend(20000)) > 10000);
    assert.ok((await b.status("node:acct:2")).remaining > 10000);
    await a.unlockMany(["node:acct:2"], lease.owner);
    assert.equal((await b.status("node:acct:2")).held, false);
    assert.equal((await b.status("node:acct:1")).held, true);
    // UNLOCK with the set's owner releases that one resource; then nothing of it is left.
    await a.unlock("node:acct:1", lease.owner);
    assert.equal((await b.status("node:acct:1")).held, false);
    await assert.rejects(lease.release(), NotHeldError);

    const fence = await b.usingMany(["node:acct:2", "node:acct:1"], { ttl: 10000, wait: 5000 }, async (held) => {
      assert.ok((await a.extendMany(["node:acct:1"], held.owner, 15000)) > 10000);
      return held.fence;
    });
    assert.ok(fence > lease.fence);
    for (const resource of ["node:acct:1", "node:acct:2"]) assert.equal((await b.status(resource)).held, false);
    for (const bad of [[], ["a", "a"], "node:acct:1", ["two words"]]) {
      await assert.rejects(a.acquireMany(bad, { ttl: 1000 }), TypeError);
    }
  });

  test("an aborted MLOCK wait is consumed and the set it was granted is released", async () => {
    const [holder, waiter, third] = [client(), client(), client()];
    const held = await holder.acquire("node:set-abort:b", { ttl: 30000 });
    const controller = new AbortController();
    const waiting = waiter.acquireMany(["node:set-abort:a", "node:set-abort:b"], { ttl: 60000, wait: 30000, signal: controller.signal });
    assert.ok(await eventually(async () => (await daemon.info()).waiters === 1), "the set was never queued");
    controller.abort(new Error("gave up"));
    await assert.rejects(waiting, /gave up/);
    const acquired = (await daemon.info()).counters.acquired;
    await held.release(); // the daemon now grants the set to the abandoned wait
    assert.ok(
      await eventually(async () => !(await busy(third.acquireMany(["node:set-abort:a", "node:set-abort:b"], { ttl: 1000 })))),
      "the set granted to the aborted waiter was not released (MUNLOCK)",
    );
    assert.ok((await daemon.info()).counters.acquired >= acquired + 2, "the aborted wait was never granted: the test proved nothing");
    await waiter.ping();
  });

  test("KEEP holds of every kind are lost when three masters die", async () => {
    const c = client();
    const set = await c.acquireMany(["node:lost:a", "node:lost:b"], { ttl: 1000, keep: true });
    const permit = await c.semaphore("node:lost:pool", 2, { ttl: 1000, keep: true });
    const reader = await c.acquire("node:lost:rw", { ttl: 1000, keep: true, shared: true });
    for (let i = 0; i < 3; i++) await fleet.kill(i);
    for (const lease of [set, permit, reader]) {
      assert.ok(await eventually(() => lease.signal.aborted, 20000), `no LOST for the ${lease.kind} hold`);
      assert.match(lease.signal.reason.message, /LOST/);
      await lease.release(); // reported lost: no NotHeldError
    }
  });
});
