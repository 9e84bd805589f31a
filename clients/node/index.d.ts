// Types for the redlockd client (index.js).
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

export interface AcquireOptions {
  /** ms, required. */
  ttl: number;
  /** ms to queue for the lock (LOCK ... WAIT). */
  wait?: number;
  /** Bind the lock to the connection: renewed by the daemon, lease.signal aborts when lost. */
  keep?: boolean;
  /** Abandons the request: the promise rejects; a lock granted later is released at once. */
  signal?: AbortSignal;
}

export class Lease {
  readonly resource: string;
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
  /** EXTEND to ttl ms from now; resolves to the new validity in ms. */
  extend(ttl: number): Promise<number>;
  /** UNLOCK; rejects with NotHeldError if it had run out without having been reported lost. */
  release(): Promise<void>;
}

export class Client {
  /** addresses: "host:port" strings or one comma-separated string, tried in order. */
  constructor(addresses: string | Iterable<string>, options?: ClientOptions);
  /** The daemon of the current connection, or null. */
  readonly address: string | null;
  acquire(resource: string, options: AcquireOptions): Promise<Lease>;
  /** Runs fn under the lock and releases it afterwards, also when fn throws. */
  using<T>(resource: string, options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  release(lease: Lease): Promise<void>;
  unlock(resource: string, owner: string): Promise<void>;
  /** Resolves to the new validity in ms. */
  extend(resource: string, owner: string, ttl: number): Promise<number>;
  ping(): Promise<void>;
  info(): Promise<Record<string, unknown>>;
  /** Closes the connection; the daemon releases this client's KEEP locks. */
  close(): void;
}
