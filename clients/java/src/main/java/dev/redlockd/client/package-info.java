/**
 * A client of redlockd, the Redlock lock daemon (protocol v1), with the standard library only.
 *
 * <p>{@link dev.redlockd.client.RedlockdClient} holds one pipelined connection (plain or TLS, with
 * {@code AUTH}) to one of a list of daemons and fails over between them. Locks come as leases
 * ({@link dev.redlockd.client.Lease}: {@code AutoCloseable}, with the fencing token) or as {@link
 * dev.redlockd.client.RedlockdLock}, a reentrant {@link java.util.concurrent.locks.Lock}. Every
 * refusal is an unchecked {@link dev.redlockd.client.RedlockdException}. Compiled for Java 17, with
 * no {@code synchronized} around blocking I/O, so callers may be virtual threads (Java 21).
 */
package dev.redlockd.client;
