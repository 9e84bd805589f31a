// Client for redlockd, the Redlock lock daemon (protocol v1.1). Node 20, ESM, no dependencies.
//
//   import { Client } from "redlockd";
//   const client = new Client(["127.0.0.1:7400", "127.0.0.1:7410"]);
//   await client.using("orders:1", { ttl: 10000, wait: 5000 }, async (lease) => {
//     await db.write(lease.fence, { signal: lease.signal });
//   });
//
// The lock family: acquire(resource, { ttl, shared: true }) (a read lock), semaphore(resource,
// permits, { ttl }) (one of n permits), acquireMany([r1, r2], { ttl }) (all or nothing), and
// usingMany(resources, options, fn).
//
// One client holds one connection at a time and pipelines every call made on it: replies are
// matched to requests by their order, LOST pushes are recognised between them. When the
// connection fails, calls in flight reject with ConnectionLostError, every KEEP lease of that
// connection is lost (its signal aborts), and the next call connects to the next address.

import net from "node:net";
import tls from "node:tls";

// ---------------------------------------------------------------------------------------------
// Errors

export class RedlockdError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** BUSY: someone else holds the lock. retryAfter: ms, the smallest remaining TTL reported. */
export class LockBusyError extends RedlockdError {
  constructor(retryAfter) {
    super(`lock is held by someone else (retry after ${retryAfter} ms)`);
    this.retryAfter = retryAfter;
  }
}

/** NOQUORUM: too few masters took part; nothing of the attempt is left locked. */
export class NoQuorumError extends RedlockdError {
  constructor(granted, needed) {
    super(`no quorum: ${granted} master(s) granted, ${needed} needed`);
    this.granted = granted;
    this.needed = needed;
  }
}

/** NOTHELD: UNLOCK or EXTEND by an owner that no longer holds the lock on a majority. */
export class NotHeldError extends RedlockdError {
  constructor(resource) {
    super(`lock ${JSON.stringify(resource ?? "")} is not held by this owner`);
    this.resource = resource;
  }
}

/** ERR <CODE> <message>: the request was refused and changed nothing. */
export class ServerError extends RedlockdError {
  constructor(code, message) {
    super(`${code} ${message}`.trim());
    this.code = code;
  }
}

/** ERR NOAUTH or ERR AUTH_FAILED. */
export class AuthError extends ServerError {}

/** ERR PERMITS_MISMATCH: the semaphore's permits in use were taken with another number. */
export class PermitsMismatchError extends ServerError {}

/** The connection failed with the request in flight: its outcome is unknown. */
export class ConnectionLostError extends RedlockdError {}

/** No daemon of the address list could be reached. */
export class UnavailableError extends RedlockdError {}

/** The reason of an aborted lease.signal. */
export class LockLostError extends RedlockdError {}

function replyError(reply, resource) {
  const parts = reply.split(" ");
  switch (parts[0]) {
    case "BUSY":
      if (parts.length === 2) return new LockBusyError(Number(parts[1]));
      break;
    case "NOQUORUM":
      if (parts.length === 3) return new NoQuorumError(Number(parts[1]), Number(parts[2]));
      break;
    case "NOTHELD":
      return new NotHeldError(resource);
    case "ERR":
      if (parts.length >= 2) {
        const message = parts.slice(2).join(" ");
        if (parts[1] === "NOAUTH" || parts[1] === "AUTH_FAILED") return new AuthError(parts[1], message);
        if (parts[1] === "PERMITS_MISMATCH") return new PermitsMismatchError(parts[1], message);
        return new ServerError(parts[1], message);
      }
      break;
  }
  return new ServerError("PROTOCOL", `unexpected reply ${JSON.stringify(reply)}`);
}

// ---------------------------------------------------------------------------------------------
// Arguments

function token(value, what) {
  if (typeof value !== "string" || value.length < 1 || value.length > 256 || !/^[\x21-\x7e]+$/.test(value)) {
    throw new TypeError(`${what} must be 1 to 256 printable ASCII characters without spaces`);
  }
  return value;
}

function millis(value, what, minimum = 1) {
  if (typeof value !== "number" || !Number.isFinite(value) || Math.round(value) < minimum) {
    throw new TypeError(`${what} must be a number of milliseconds, at least ${minimum}`);
  }
  return Math.round(value);
}

function parseAddress(address) {
  const text = String(address).trim();
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:]+):(\d+)$/.exec(text);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) {
    throw new TypeError(`address must be HOST:PORT, got ${JSON.stringify(address)}`);
  }
  return { host: m[1], port: Number(m[2]), text };
}

// ---------------------------------------------------------------------------------------------
// Requests and replies: each request's line and the reading of its reply, no I/O. A new kind of
// request is one line builder and one reply parser here.

/** The kinds a Lease holds (lease.kind); the owner says it too. */
export const Kind = Object.freeze({ EXCLUSIVE: "exclusive", SHARED: "shared", PERMIT: "permit", SET: "set" });

function lockOptions({ wait, keep, label, maxHold }) {
  let line = "";
  if (wait !== undefined) line += ` WAIT ${millis(wait, "wait", 0)}`;
  if (keep) line += " KEEP";
  if (label !== undefined) {
    if (typeof label !== "string" || label.length > 64) throw new TypeError("label must be 1 to 64 printable ASCII characters without spaces");
    line += ` LABEL ${token(label, "label")}`;
  }
  if (maxHold !== undefined) {
    if (!keep) throw new TypeError("maxHold needs keep: the daemon renews only KEEP locks");
    line += ` MAXHOLD ${millis(maxHold, "maxHold")}`;
  }
  return line;
}

function permitCount(permits) {
  if (!Number.isInteger(permits) || permits < 1) throw new RangeError(`permits must be an integer of at least 1, not ${permits}`);
  return permits;
}

/** LOCK of one resource: exclusive, SHARED or one of PERMITS n. */
function lockLine(resource, options) {
  const { ttl, shared, permits } = options;
  let line = `LOCK ${token(resource, "resource")} ${millis(ttl, "ttl")}`;
  if (shared && permits !== undefined) throw new TypeError("a lock is shared or a permit of a semaphore, not both");
  if (shared) line += " SHARED";
  if (permits !== undefined) line += ` PERMITS ${permitCount(permits)}`;
  return line + lockOptions(options);
}

/** MLOCK's resources: at least one, each named once, in the caller's order. */
function resourceList(resources) {
  if (typeof resources === "string" || resources == null || typeof resources[Symbol.iterator] !== "function") {
    throw new TypeError("resources must be an array of resource names");
  }
  const names = [...resources].map((r) => token(r, "resource"));
  if (names.length === 0) throw new TypeError("at least one resource is needed");
  if (new Set(names).size !== names.length) throw new TypeError(`each resource may be named once: ${names.join(" ")}`);
  return names;
}

function mlockLine(names, options) {
  return `MLOCK ${names.length} ${names.join(" ")} ${millis(options.ttl, "ttl")}` + lockOptions(options);
}

/** LOCK's `OK <owner> <fence> <validity_ms>`. */
function parseGrant(reply, resource) {
  const parts = reply.split(" ");
  if (parts[0] !== "OK" || parts.length !== 4) throw replyError(reply, resource);
  return { owner: parts[1], fence: BigInt(parts[2]), validity: Number(parts[3]) };
}

function expectOk(reply, resource) {
  if (reply !== "OK") throw replyError(reply, resource);
}

/** EXTEND's `OK <validity_ms>`. */
function parseValidity(reply, resource) {
  const parts = reply.split(" ");
  if (parts[0] !== "OK" || parts.length !== 2) throw replyError(reply, resource);
  return Number(parts[1]);
}

/**
 * STATUS's `OK HELD <pttl_ms> [field=value...]` or `OK FREE [field=value...]`, the fields
 * label=, readers= and permits=<used>/<n> in any order (others are ignored).
 */
function parseStatus(reply, resource) {
  const parts = reply.split(" ");
  const held = parts[0] === "OK" && parts[1] === "HELD" && /^\d+$/.test(parts[2] ?? "");
  if (!held && !(parts[0] === "OK" && parts[1] === "FREE")) throw replyError(reply, resource);
  const status = { held, remaining: held ? Number(parts[2]) : 0 };
  for (const part of parts.slice(held ? 3 : 2)) {
    const equals = part.indexOf("=");
    if (equals < 0) throw replyError(reply, resource);
    const [name, value] = [part.slice(0, equals), part.slice(equals + 1)];
    if (name === "label") status.label = value;
    else if (name === "readers" && /^\d+$/.test(value)) status.readers = Number(value);
    else if (name === "permits" && /^\d+\/\d+$/.test(value)) {
      const [used, total] = value.split("/");
      status.permitsUsed = Number(used);
      status.permits = Number(total);
    } else if (name === "readers" || name === "permits") throw new ServerError("PROTOCOL", `unexpected reply ${JSON.stringify(reply)}`);
  }
  return status;
}

/** LIST's `OK <json>`: { locks: [{ resource, kind, remaining, labels }], truncated }. */
function parseListing(reply) {
  if (!reply.startsWith("OK {")) throw replyError(reply);
  const body = JSON.parse(reply.slice(3));
  return {
    locks: body.locks.map((l) => ({ resource: l.resource, kind: l.kind, remaining: l.ttl_ms, labels: l.labels })),
    truncated: body.truncated,
  };
}

function parsePong(reply) {
  if (reply !== "PONG") throw replyError(reply);
}

/** HELLO's `OK redlockd <version> proto=1 ...`, without the OK. */
function parseHello(reply) {
  if (!reply.startsWith("OK ")) throw replyError(reply);
  return reply.slice(3);
}

function parseInfo(reply) {
  if (!reply.startsWith("OK ")) throw replyError(reply);
  return JSON.parse(reply.slice(3));
}

// Symbol.asyncDispose (await using) exists from Node 20.4 on.
const asyncDispose = Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose");
const dispose = Symbol.dispose ?? Symbol.for("Symbol.dispose");

// ---------------------------------------------------------------------------------------------
// One connection

class KeepState {
  constructor(resource, owner) {
    this.resource = resource;
    this.owner = owner;
    this.controller = new AbortController();
  }
  lose(reason) {
    if (!this.controller.signal.aborted) this.controller.abort(new LockLostError(reason));
  }
}

class Connection {
  constructor(socket, address, timeout) {
    this.socket = socket;
    this.address = address;
    this.timeout = timeout; // ms a reply may take beyond its WAIT; 0: no limit
    this.headDeadline = 0;
    this.timer = null;
    this.pending = []; // in request order; replies resolve the head
    this.head = 0;
    this.keeps = new Map(); // owner -> KeepState
    this.closed = false;
    this.buffer = "";
    socket.setEncoding("latin1");
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30000);
    socket.on("data", (chunk) => this.#data(chunk));
    socket.on("error", (error) => this.#fail(error));
    socket.on("close", () => this.#fail(null));
  }

  /** Queues and writes one request; the entry's resolve/reject get its reply. */
  send(entry) {
    if (this.closed) return false;
    if (this.timeout > 0) {
      entry.deadline = performance.now() + this.timeout + (entry.wait ?? 0);
      if (this.head >= this.pending.length) this.#timeHead(entry.deadline);
    }
    this.pending.push(entry);
    this.socket.write(entry.line + "\n");
    return true;
  }

  request(line, extra = {}) {
    return new Promise((resolve, reject) => {
      const entry = { line, resolve, reject, ...extra };
      if (!this.send(entry)) reject(new ConnectionLostError(`connection to ${this.address} is closed`));
    });
  }

  /** A request whose reply nobody waits for; it is still read in its turn. */
  sendNoWait(line) {
    this.send({ line, resolve() {}, reject() {} });
  }

  close() {
    this.socket.end();
    this.socket.destroy();
  }

  // Only the head of the queue can be late: the others' replies come after it.
  #timeHead(deadline) {
    this.headDeadline = deadline;
    if (this.timer) return;
    const check = () => {
      this.timer = null;
      if (this.closed || this.head >= this.pending.length) return;
      const left = this.headDeadline - performance.now();
      if (left > 0) {
        this.timer = setTimeout(check, left + 1);
        this.timer.unref?.();
        return;
      }
      this.#fail(new Error(`no reply within ${this.timeout} ms: daemon hung?`));
    };
    this.timer = setTimeout(check, Math.max(0, deadline - performance.now()) + 1);
    this.timer.unref?.();
  }

  #data(chunk) {
    this.buffer += chunk;
    let end;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      let line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      this.#line(line);
      if (this.closed) return;
    }
  }

  #line(line) {
    if (line.startsWith("LOST ")) {
      // A push, never a reply: it can arrive between any two replies.
      const [, resource, owner] = line.split(" ");
      const state = this.keeps.get(owner);
      if (state && state.resource === resource) {
        this.keeps.delete(owner);
        state.lose("the daemon could not renew the lock (LOST)");
      }
      return;
    }
    if (this.head >= this.pending.length) {
      this.#fail(new RedlockdError(`reply ${JSON.stringify(line)} with no request waiting`));
      return;
    }
    const entry = this.pending[this.head];
    this.pending[this.head++] = undefined;
    if (this.timeout > 0 && this.head < this.pending.length) {
      // The new head may have waited behind a slow WAIT: its clock starts now at most.
      this.#timeHead(Math.max(this.pending[this.head].deadline, performance.now() + this.timeout));
    }
    if (this.head > 1024 && this.head * 2 > this.pending.length) {
      this.pending = this.pending.slice(this.head);
      this.head = 0;
    }
    if (entry.keep && line.startsWith("OK ")) {
      // Registered before the next line is handled: a LOST may follow right away.
      const owner = line.split(" ")[1];
      entry.state = new KeepState(entry.resource, owner);
      this.keeps.set(owner, entry.state);
    }
    if (entry.abandoned) {
      this.cleanUp(entry, line);
      return;
    }
    entry.done = true;
    entry.resolve(line);
  }

  /** An abandoned LOCK or MLOCK whose reply granted the lock: release it at once. */
  cleanUp(entry, line) {
    if (entry.isLock && line.startsWith("OK ")) {
      const owner = line.split(" ")[1];
      this.keeps.delete(owner);
      this.sendNoWait(`${entry.release ?? `UNLOCK ${entry.resource}`} ${owner}`);
    }
  }

  #fail(error) {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.socket.destroy();
    const reason = `connection to ${this.address} ${error ? `failed: ${error.message}` : "closed"}`;
    const pending = this.pending.slice(this.head);
    this.pending = [];
    this.head = 0;
    const keeps = [...this.keeps.values()];
    this.keeps.clear();
    // A KEEP lock lives exactly as long as its connection: it does not survive a failover.
    // First: a caller that sees its call fail finds them lost already.
    for (const state of keeps) state.lose(reason);
    for (const entry of pending) {
      if (entry && !entry.abandoned) entry.reject(new ConnectionLostError(reason, { cause: error ?? undefined }));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Lease and Client

export class Lease {
  #client;
  #conn;
  #state;
  #controller;
  #timer = null;
  #released = false;

  constructor(client, resource, owner, fence, validity, keep, state, conn, { kind = Kind.EXCLUSIVE, resources, permits, ttl } = {}) {
    this.#client = client;
    this.#conn = conn;
    this.#state = state;
    /** The locked resource (a set's first). */
    this.resource = resource;
    /** Every resource held: a set's, in the order its MLOCK named them. */
    this.resources = resources ?? [resource];
    /** "exclusive", "shared", "permit" or "set" (Kind). */
    this.kind = kind;
    /** A permit's semaphore size (its n), else undefined. */
    this.permits = permits;
    /** ms: the TTL the masters last set (the LOCK's, or the last extend's). */
    this.ttl = ttl;
    /** The capability to unlock or extend: treat it like a password. */
    this.owner = owner;
    /** The fencing token (unsigned 64-bit, hence a bigint): pass it to the storage. */
    this.fence = fence;
    /** ms the lock was guaranteed when the reply was written (or the last extend). */
    this.validity = validity;
    this.keep = keep;
    this.expiresAt = performance.now() + validity;
    if (state) {
      // Aborted when the daemon pushes LOST or the connection fails.
      this.signal = state.controller.signal;
    } else {
      // A plain lease is not renewed: its signal aborts when its validity runs out.
      this.#controller = new AbortController();
      this.signal = this.#controller.signal;
      this.#arm();
    }
  }

  #arm() {
    if (this.#timer) clearTimeout(this.#timer);
    const left = this.expiresAt - performance.now();
    // setTimeout fires at once beyond 2^31-1 ms: re-arm in steps for very long TTLs.
    this.#timer = setTimeout(() => {
      if (this.expiresAt - performance.now() > 0) this.#arm();
      else this.#controller.abort(new LockLostError(`the validity of ${this.resource} ran out`));
    }, Math.min(Math.max(0, left), 2 ** 31 - 1));
    this.#timer.unref?.();
  }

  /** true once the lock is lost (KEEP) or its validity ran out (plain). */
  get lost() {
    return this.signal.aborted;
  }

  /** A permit: which slot of the semaphore it holds (the owner says it); else undefined. */
  get slot() {
    return this.kind === Kind.PERMIT ? parseInt(this.owner.slice(5, 8), 16) : undefined;
  }

  /** EXTEND (MEXTEND for a set) to ttl ms from now; resolves to the new validity in ms. */
  async extend(ttl) {
    const validity =
      this.kind === Kind.SET
        ? await this.#client.extendMany(this.resources, this.owner, ttl)
        : await this.#client.extend(this.resource, this.owner, ttl);
    this.validity = validity;
    this.ttl = ttl;
    this.expiresAt = performance.now() + validity;
    if (this.#controller && !this.#controller.signal.aborted) this.#arm();
    return validity;
  }

  /** ms of guaranteed validity left (0 once lost). */
  remaining() {
    return this.signal.aborted ? 0 : Math.max(0, this.expiresAt - performance.now());
  }

  /** `await using lease = await client.acquire(...)` releases it at the end of the scope. */
  [asyncDispose]() {
    return this.release();
  }

  /**
   * UNLOCK (MUNLOCK for a set). Rejects with NotHeldError if it had run out, unless it was
   * reported lost already.
   */
  async release() {
    if (this.#released) return;
    this.#released = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#conn?.keeps.delete(this.owner);
    const wasLost = this.signal.aborted;
    try {
      if (this.kind === Kind.SET) await this.#client.unlockMany(this.resources, this.owner);
      else await this.#client.unlock(this.resource, this.owner);
    } catch (error) {
      if (wasLost && (error instanceof NotHeldError || error instanceof ConnectionLostError || error instanceof UnavailableError)) {
        return;
      }
      throw error;
    }
  }
}

export class Client {
  #addresses;
  #secret;
  #tls;
  #connectTimeout;
  #requestTimeout;
  #conn = null;
  #connecting = null;
  #index = 0;
  #closed = false;

  /**
   * @param addresses "host:port" strings (or one comma-separated string), tried in order.
   * @param options secret: sent with AUTH; tls: true or tls.connect options (ca, cert, key,
   *   servername); connectTimeout: ms per address (default 5000); requestTimeout: ms a reply
   *   may take beyond its WAIT before the daemon counts as hung and the connection is closed
   *   like a failed one (default 10000; 0: no limit).
   */
  constructor(addresses, options = {}) {
    const list = typeof addresses === "string" ? addresses.split(",") : [...addresses];
    if (list.length === 0) throw new TypeError("at least one address is needed");
    this.#addresses = list.map(parseAddress);
    this.#secret = options.secret === undefined ? undefined : token(options.secret, "secret");
    this.#tls = options.tls === true ? {} : options.tls || null;
    this.#connectTimeout = options.connectTimeout ?? 5000;
    this.#requestTimeout = options.requestTimeout ?? 10000;
  }

  /** The daemon the current connection goes to, or null. */
  get address() {
    return this.#conn && !this.#conn.closed ? this.#conn.address : null;
  }

  async #connection() {
    if (this.#closed) throw new UnavailableError("the client is closed");
    if (this.#conn && !this.#conn.closed) return this.#conn;
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  async #connect() {
    if (this.#conn) {
      this.#conn = null;
      this.#index = (this.#index + 1) % this.#addresses.length; // fail over to the next one
    }
    const problems = [];
    for (let i = 0; i < this.#addresses.length; i++) {
      const index = (this.#index + i) % this.#addresses.length;
      const address = this.#addresses[index];
      try {
        const conn = await this.#open(address);
        if (this.#closed) {
          conn.close();
          throw new UnavailableError("the client is closed");
        }
        this.#index = index;
        this.#conn = conn;
        return conn;
      } catch (error) {
        if (error instanceof AuthError || error instanceof UnavailableError) throw error;
        problems.push(`${address.text}: ${error.message}`);
      }
    }
    throw new UnavailableError(`no redlockd reachable: ${problems.join("; ")}`);
  }

  async #open(address) {
    const socket = await new Promise((resolve, reject) => {
      let s;
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error(`no connection within ${this.#connectTimeout} ms`));
      }, this.#connectTimeout);
      const done = (error) => {
        clearTimeout(timer);
        s.removeAllListeners("error");
        if (error) {
          s.destroy();
          reject(error);
        } else resolve(s);
      };
      if (this.#tls) {
        const servername = net.isIP(address.host) ? undefined : address.host;
        s = tls.connect({ servername, ...this.#tls, host: address.host, port: address.port }, () => done());
      } else {
        s = net.connect({ host: address.host, port: address.port }, () => done());
      }
      s.once("error", done);
    });
    const conn = new Connection(socket, address.text, this.#requestTimeout);
    const timer = setTimeout(() => conn.close(), this.#connectTimeout);
    try {
      // AUTH and HELLO in one write: the daemon checks requests in order.
      const auth = this.#secret === undefined ? null : conn.request(`AUTH ${this.#secret}`);
      const hello = conn.request("HELLO");
      auth?.catch(() => {});
      hello.catch(() => {});
      if (auth) {
        expectOk(await auth);
      }
      const version = parseHello(await hello);
      if (!` ${version}`.includes(" proto=1")) throw new ServerError("PROTOCOL", `not a redlockd speaking protocol 1: ${version}`);
      return conn;
    } catch (error) {
      conn.close();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  async #call(line, extra = {}, signal) {
    let conn = await this.#connection();
    signal?.throwIfAborted();
    const entry = { line, ...extra };
    const reply = new Promise((resolve, reject) => {
      entry.resolve = resolve;
      entry.reject = reject;
    });
    if (!conn.send(entry)) {
      conn = await this.#connection(); // it died just before: the request never left
      if (!conn.send(entry)) throw new ConnectionLostError(`connection to ${conn.address} is closed`);
    }
    if (!signal) return { reply: await reply, conn, entry };
    let onAbort;
    const aborted = new Promise((_, reject) => {
      onAbort = () => {
        // The reply still comes, in its turn; the connection consumes it, and if it grants a
        // lock the lock is released.
        if (!entry.done) entry.abandoned = true;
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return { reply: await Promise.race([reply, aborted]), conn, entry };
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  async #grant(line, resources, kind, options) {
    const { ttl, wait, keep = false, signal, permits } = options;
    const release = kind === Kind.SET ? `MUNLOCK ${resources.length} ${resources.join(" ")}` : `UNLOCK ${resources[0]}`;
    const extra = { resource: resources[0], keep, isLock: true, wait: wait ?? 0, release };
    const { reply, conn, entry } = await this.#call(line, extra, signal);
    const { owner, fence, validity } = parseGrant(reply, resources[0]);
    return new Lease(this, resources[0], owner, fence, validity, keep, entry.state ?? null, keep ? conn : null, {
      kind,
      resources,
      permits,
      ttl: millis(ttl, "ttl"),
    });
  }

  /**
   * LOCK. options: ttl (ms, required), wait (ms), keep (bool), signal (an AbortSignal that
   * abandons the request), shared (a read lock: any number at once, none while an exclusive
   * lock is held or a writer waits), permits (n: one of the n permits of the semaphore
   * `resource`), label (names the holder in STATUS and LIST), maxHold (ms, with keep: renewed
   * for at most that long). Rejects with LockBusyError, NoQuorumError, PermitsMismatchError,
   * ServerError...
   */
  async acquire(resource, options = {}) {
    const line = lockLine(resource, options);
    const kind = options.permits !== undefined ? Kind.PERMIT : options.shared ? Kind.SHARED : Kind.EXCLUSIVE;
    return this.#grant(line, [resource], kind, options);
  }

  /** One of `permits` permits of the semaphore `resource` (LOCK ... PERMITS n). */
  semaphore(resource, permits, options = {}) {
    return this.acquire(resource, { ...options, permits });
  }

  /**
   * MLOCK: every resource at once or none (no deadlock, whatever the order); one owner and one
   * fence for the set. options as acquire's (but shared and permits). The lease releases and
   * extends the whole set; a LOST names its first resource.
   */
  async acquireMany(resources, options = {}) {
    const names = resourceList(resources);
    if (options.shared || options.permits !== undefined) throw new TypeError("a set of resources is exclusive: no shared or permits");
    return this.#grant(mlockLine(names, options), names, Kind.SET, options);
  }

  /** Runs fn(lease) holding every resource (MLOCK), released afterwards, also when fn throws. */
  async usingMany(resources, options, fn) {
    return this.#using(await this.acquireMany(resources, options), fn);
  }

  /** Runs fn(lease) under the lock and releases it afterwards, also when fn throws. */
  async using(resource, options, fn) {
    return this.#using(await this.acquire(resource, options), fn);
  }

  async #using(lease, fn) {
    let result;
    try {
      result = await fn(lease);
    } catch (error) {
      await lease.release().catch(() => {}); // fn's own error is the one worth seeing
      throw error;
    }
    await lease.release();
    return result;
  }

  /** Releases a lease (same as lease.release()). */
  release(lease) {
    return lease.release();
  }

  /** UNLOCK, for a hold of any kind (a set's owner releases that one resource). */
  async unlock(resource, owner) {
    const { reply } = await this.#call(`UNLOCK ${token(resource, "resource")} ${token(owner, "owner")}`);
    expectOk(reply, resource);
  }

  /** EXTEND, for a hold of any kind; resolves to the validity in ms. */
  async extend(resource, owner, ttl) {
    const { reply } = await this.#call(`EXTEND ${token(resource, "resource")} ${token(owner, "owner")} ${millis(ttl, "ttl")}`);
    return parseValidity(reply, resource);
  }

  /** MUNLOCK: releases these resources of a set (all of them, or fewer). */
  async unlockMany(resources, owner) {
    const names = resourceList(resources);
    const { reply } = await this.#call(`MUNLOCK ${names.length} ${names.join(" ")} ${token(owner, "owner")}`);
    expectOk(reply, names[0]);
  }

  /** MEXTEND: these resources of a set to ttl ms from now; resolves to the validity in ms. */
  async extendMany(resources, owner, ttl) {
    const names = resourceList(resources);
    const { reply } = await this.#call(`MEXTEND ${names.length} ${names.join(" ")} ${token(owner, "owner")} ${millis(ttl, "ttl")}`);
    return parseValidity(reply, names[0]);
  }

  /**
   * STATUS: { held, remaining } (remaining: ms at least before a LOCK could succeed, unless it is
   * released; 0 when free), with label, readers (shared holders), permitsUsed and permits (of
   * the semaphore of that name) when the daemon says them; read from the masters, never naming
   * the owner. Rejects with NoQuorumError when too few masters answered to say.
   */
  async status(resource) {
    const { reply } = await this.#call(`STATUS ${token(resource, "resource")}`);
    return parseStatus(reply, resource);
  }

  /**
   * LIST: the resources held on a majority of the masters (through any daemon) whose names start
   * with `prefix`, at most `count` (the daemon's default 100, at most 1000), with their kind, time
   * left (ms) and labels; never an owner. Resolves to { locks, truncated }.
   */
  async list(prefix = "", { count } = {}) {
    let line = "LIST";
    if (prefix !== "") line += ` ${token(prefix, "prefix")}`;
    if (count !== undefined) {
      if (!Number.isInteger(count) || count < 1) throw new RangeError(`count must be a positive integer, not ${count}`);
      line += ` COUNT ${count}`;
    }
    const { reply } = await this.#call(line);
    return parseListing(reply);
  }

  async ping() {
    const { reply } = await this.#call("PING");
    parsePong(reply);
  }

  /** HELLO: "redlockd <version> proto=1.1 nodes=N quorum=Q" (proto=1 before the lock family). */
  async hello() {
    const { reply } = await this.#call("HELLO");
    return parseHello(reply);
  }

  /** INFO: the daemon's state (see the Info type in index.d.ts). */
  async info() {
    const { reply } = await this.#call("INFO");
    return parseInfo(reply);
  }

  /** Closes the connection; the daemon then releases this client's KEEP locks. */
  close() {
    this.#closed = true;
    this.#conn?.close();
    this.#conn = null;
  }

  /** `using client = new Client(...)` closes it at the end of the scope. */
  [dispose]() {
    this.close();
  }

  /** `await using client = new Client(...)` closes it at the end of the scope. */
  async [asyncDispose]() {
    this.close();
  }
}
