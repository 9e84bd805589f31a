// Types for the redlockd client (index.js). `await using` needs TypeScript 5.2 or later with
// the esnext.disposable library (or @types/node 20), as for any disposable.
import type { ConnectionOptions } from "node:tls";

export class RedlockdError extends Error {}
/** BUSY: someone else holds the lock. */
export class LockBusyError extends RedlockdError {
  /** ms: the smallest remaining TTL the refusing masters reported (0 if unknown). */
  readonly retryAfter: number;
}
/** NOQUORUM: too few masters took part; nothing of the attempt is left locked. */
export class NoQuorumError extends RedlockdError {
  readonly granted: number;
  readonly needed: number;
}
/** NOTHELD: UNLOCK or EXTEND by an owner that no longer holds the lock. */
export class NotHeldError extends RedlockdError {
  readonly resource: string | undefined;
}
/** ERR <CODE> <message>. */
export class ServerError extends RedlockdError {
  readonly code: string;
}
/** ERR NOAUTH / ERR AUTH_FAILED. */
export class AuthError extends ServerError {}
/** ERR PERMITS_MISMATCH: the semaphore's permits in use were taken with another number. */
export class PermitsMismatchError extends ServerError {}
/** The connection failed with the request in flight; its outcome is unknown. */
export class ConnectionLostError extends RedlockdError {}
/** No daemon of the address list could be reached. */
export class UnavailableError extends RedlockdError {}
/** The reason of an aborted lease.signal. */
export class LockLostError extends RedlockdError {}

export interface ClientOptions {
  /** Sent with AUTH on every new connection. */
  secret?: string;
  /** true (system CAs) or node:tls connect options (ca, cert, key, servername, ...). */
  tls?: true | ConnectionOptions;
  /** ms per address for connecting, the TLS handshake and AUTH (default 5000). */
  connectTimeout?: number;
  /**
   * ms a reply may take beyond the request's WAIT before the daemon counts as hung: the
   * connection is then closed like a failed one (default 10000; 0: no limit).
   */
  requestTimeout?: number;
}

/** What a lease holds; the owner says it too. */
export type LockKind = "exclusive" | "shared" | "permit" | "set";
export const Kind: {
  readonly EXCLUSIVE: "exclusive";
  readonly SHARED: "shared";
  readonly PERMIT: "permit";
  readonly SET: "set";
};

/** Options of every kind of lock. */
export interface LockOptions {
  /** ms, required. */
  ttl: number;
  /** ms to queue for the lock (LOCK ... WAIT). */
  wait?: number;
  /** Bind the lock to the connection: renewed by the daemon, lease.signal aborts when lost. */
  keep?: boolean;
  /** Abandons the request: the promise rejects; a lock granted later is released at once. */
  signal?: AbortSignal;
  /** Names the holder in STATUS and LIST (1 to 64 printable ASCII characters, no spaces). */
  label?: string;
  /** ms, with keep only: the daemon renews the lock for at most that long, then LOST. */
  maxHold?: number;
}

export interface AcquireOptions extends LockOptions {
  /** A shared (read) hold: any number at once, none while an exclusive lock is held or a writer waits. */
  shared?: boolean;
  /** One of this many permits of the semaphore named by the resource (LOCK ... PERMITS n). */
  permits?: number;
}

/** STATUS of a resource, read from the masters (never its owner). */
export interface Status {
  /** An exclusive LOCK now would be refused. */
  held: boolean;
  /** ms at least before a LOCK could succeed, unless the holder releases it; 0 when free. */
  remaining: number;
  /** The holder's LABEL, when its LOCK gave one (never the owner). */
  label?: string;
  /** Shared holders, when there are any. */
  readers?: number;
  /** Permits in use of the semaphore of that name, when any is. */
  permitsUsed?: number;
  /** The number of permits in force for that semaphore, when any is in use. */
  permits?: number;
}

/** One resource LIST found held on a majority of the masters (never its owner). */
export interface ListedLock {
  resource: string;
  /** "exclusive" (protocol 1.1 may list other kinds) */
  kind: string;
  /** ms at least, as Status.remaining. */
  remaining: number;
  labels: string[];
}

/** LIST's answer: the locks, sorted by resource, and whether more were left out. */
export interface Listing {
  locks: ListedLock[];
  truncated: boolean;
}

/** A master's state in INFO. */
export type NodeState =
  | "ok"
  | "connecting"
  | "down"
  | "down:auth"
  | "quarantined:restart"
  | "quarantined:keyloss"
  | "quarantined:clock"
  | "refused:eviction";

/** One master in INFO, in configuration order. */
export interface NodeInfo {
  address: string;
  state: NodeState;
  /** Last round trip in µs, -1 until measured. */
  rtt_us: number;
  /** ms before its votes count again; 0 if not quarantined. */
  quarantined_ms: number;
  /** Its maxmemory-policy is not noeviction. */
  evicts_keys: boolean;
  /** The daemon's subscriber to the master's wake channel is up. */
  wake_subscribed: boolean;
  [field: string]: unknown;
}

/** INFO's counters since the daemon started (proto/PROTOCOL.md lists them all). */
export interface Counters {
  acquired: number;
  busy: number;
  noquorum: number;
  released: number;
  extended: number;
  notheld: number;
  lost: number;
  renewed: number;
  [counter: string]: number;
}

/** INFO: the daemon's state. Fields a newer daemon adds are there too, untyped. */
export interface Info {
  version: string;
  uptime_s: number;
  /** Votes a lock needs. */
  quorum: number;
  nodes: NodeInfo[];
  counters: Counters;
  /** The largest fencing token this daemon has seen or handed out. */
  fence_high_water: number;
  /** The longest TTL granted on the fleet, in ms. */
  max_ttl_granted: number;
  clients: number;
  operations_in_flight: number;
  waiters: number;
  keep_locks: number;
  [field: string]: unknown;
}

export class Lease {
  /** The locked resource; a set's first. */
  readonly resource: string;
  /** Every resource held (a set's, in the order its MLOCK named them). */
  readonly resources: readonly string[];
  readonly kind: LockKind;
  /** A permit's semaphore size, else undefined. */
  readonly permits: number | undefined;
  /** A permit's slot (from its owner), else undefined. */
  readonly slot: number | undefined;
  /** ms: the TTL the masters last set. */
  readonly ttl: number;
  /** The capability to unlock or extend: treat it like a password. */
  readonly owner: string;
  /** Fencing token (unsigned 64-bit): pass it to the storage, which refuses smaller ones. */
  readonly fence: bigint;
  /** ms the lock was guaranteed when the reply was written (or at the last extend). */
  readonly validity: number;
  readonly keep: boolean;
  /** performance.now() at which the guaranteed validity ends. */
  readonly expiresAt: number;
  /** Aborted (reason: LockLostError) on LOST or connection loss (KEEP), or when the validity runs out (plain). */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  /** ms of guaranteed validity left (0 once lost). */
  remaining(): number;
  /** EXTEND (MEXTEND for a set) to ttl ms from now; resolves to the new validity in ms. */
  extend(ttl: number): Promise<number>;
  /** UNLOCK (MUNLOCK for a set); rejects with NotHeldError if it had run out without having been reported lost. */
  release(): Promise<void>;
  /** `await using lease = await client.acquire(...)`: released at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>;
}

export class Client {
  /** addresses: "host:port" strings or one comma-separated string, tried in order. */
  constructor(addresses: string | Iterable<string>, options?: ClientOptions);
  /** The daemon of the current connection, or null. */
  readonly address: string | null;
  /** LOCK: exclusive, shared, or a permit (options.permits); rejects with LockBusyError, NoQuorumError, PermitsMismatchError... */
  acquire(resource: string, options: AcquireOptions): Promise<Lease>;
  /** One of `permits` permits of the semaphore `resource`. */
  semaphore(resource: string, permits: number, options: LockOptions): Promise<Lease>;
  /** MLOCK: every resource at once or none; one owner and one fence for the set. */
  acquireMany(resources: Iterable<string>, options: LockOptions): Promise<Lease>;
  /** Runs fn under the lock and releases it afterwards, also when fn throws. */
  using<T>(resource: string, options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  /** Runs fn holding every resource (MLOCK) and releases them afterwards, also when fn throws. */
  usingMany<T>(resources: Iterable<string>, options: LockOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  release(lease: Lease): Promise<void>;
  /** UNLOCK, for a hold of any kind. */
  unlock(resource: string, owner: string): Promise<void>;
  /** EXTEND, for a hold of any kind; resolves to the new validity in ms. */
  extend(resource: string, owner: string, ttl: number): Promise<number>;
  /** MUNLOCK: these resources of a set. */
  unlockMany(resources: Iterable<string>, owner: string): Promise<void>;
  /** MEXTEND: these resources of a set; resolves to the new validity in ms. */
  extendMany(resources: Iterable<string>, owner: string, ttl: number): Promise<number>;
  /** STATUS; rejects with NoQuorumError when too few masters answered to say. */
  status(resource: string): Promise<Status>;
  /** LIST [prefix] [COUNT n]. */
  list(prefix?: string, options?: { count?: number }): Promise<Listing>;
  ping(): Promise<void>;
  /** HELLO: "redlockd <version> proto=1.1 nodes=N quorum=Q" (proto=1 before the lock family). */
  hello(): Promise<string>;
  info(): Promise<Info>;
  /** Closes the connection; the daemon releases this client's KEEP locks. */
  close(): void;
  /** `using client = new Client(...)`: closed at the end of the scope. */
  [Symbol.dispose](): void;
  /** `await using client = new Client(...)`: closed at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>;
}
