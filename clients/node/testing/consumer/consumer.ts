// A user's program: imports the installed "redlockd" package (not ../../index.js), uses its types
// (await using, Info, Status) and runs against the daemon at $REDLOCKD_ADDR.
import { Client, Kind, LockBusyError, PermitsMismatchError, type Info, type Lease, type LockKind, type Status } from "redlockd";

function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`package check failed: ${what}`);
}

const address = process.env.REDLOCKD_ADDR;
check(address !== undefined, "REDLOCKD_ADDR is not set");

let fence: bigint;
{
  await using client = new Client([address]);
  check((await client.hello()).startsWith("redlockd "), "hello");
  {
    await using lease = await client.acquire("package:node", { ttl: 10000 });
    fence = lease.fence;
    check(lease.remaining() > 0 && lease.remaining() <= 10000, "remaining");
    const status: Status = await client.status("package:node");
    check(status.held && status.remaining > 0, "status while held");
    const busy = await client.acquire("package:node", { ttl: 1000 }).catch((e: unknown) => e);
    check(busy instanceof LockBusyError, "a second acquire is busy");
  } // the lease is released here
  const free: Status = await client.status("package:node");
  check(!free.held && free.remaining === 0, "status once released");
  const info: Info = await client.info();
  const states: string[] = info.nodes.map((n) => n.state);
  check(info.quorum === 3 && states.every((s) => s === "ok"), `info ${JSON.stringify(info.nodes)}`);
  check(info.counters.acquired >= 1, "info counters");
}
// The lock family's types, checked by tsc (not run: the daemon here may serve protocol 1 only).
async function kinds(client: Client): Promise<bigint> {
  const reader: Lease = await client.acquire("package:rw", { ttl: 1000, shared: true, label: "x", wait: 10 });
  const permit = await client.semaphore("package:pool", 3, { ttl: 1000, keep: true, maxHold: 5000 });
  const slot: number | undefined = permit.slot;
  const set = await client.acquireMany(["package:a", "package:b"], { ttl: 1000 });
  const kind: LockKind = set.kind;
  const resources: readonly string[] = set.resources;
  await client.extendMany(resources, set.owner, 2000);
  await client.unlockMany(["package:a"], set.owner);
  const status: Status = await client.status("package:rw");
  const counts: [number | undefined, number | undefined, number | undefined] = [status.readers, status.permitsUsed, status.permits];
  const fence = await client.usingMany(["package:c"], { ttl: 1000 }, (lease) => lease.fence);
  const mismatch = await client.semaphore("package:pool", 4, { ttl: 1000 }).catch((e: unknown) => e instanceof PermitsMismatchError);
  check(kind === Kind.SET && slot !== -1 && counts.length === 3 && mismatch !== undefined, "types");
  await reader.release();
  return fence + BigInt(permit.ttl);
}
void kinds;
console.log(`redlockd from node_modules: lock ${fence} released by await using; status and info typed`);
