package dev.redlockd.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One request in flight. Replies come in request order, so the reader resolves the head of the
 * connection's queue. A caller that stops waiting (interrupted, its future cancelled) abandons the
 * call: the reply is still read in its turn and, if it grants a lock, that lock is released.
 */
final class Call {
  final String line;
  /** For a LOCK: the request that releases its grant, less the owner ("UNLOCK r "); else null. */
  final String releasePrefix;
  final String resource;
  final boolean keep;
  /** The WAIT it carries: its reply may take that long. */
  final long waitNanos;
  /** Completed by the reader with the reply line, or exceptionally when the connection fails. */
  final CompletableFuture<String> reply = new CompletableFuture<>();

  // Set by the reader before it completes the reply (the completion publishes them).
  long deadline; // guarded by the connection's lock
  long receivedNanos;
  LostSignal keepSignal;

  private final ReentrantLock lock = new ReentrantLock();
  private boolean resolved;
  private boolean abandoned;
  private String replyLine;

  private Call(String line, String releasePrefix, String resource, boolean keep, long waitNanos) {
    this.line = line;
    this.releasePrefix = releasePrefix;
    this.resource = resource;
    this.keep = keep;
    this.waitNanos = waitNanos;
  }

  /** A request that takes no lock (UNLOCK, EXTEND, PING...). */
  static Call of(String line) {
    return new Call(line, null, null, false, 0);
  }

  static Call lock(String line, String resource, boolean keep, long waitNanos) {
    return new Call(line, Protocol.unlockPrefix(resource), resource, keep, waitNanos);
  }

  boolean isLock() {
    return releasePrefix != null;
  }

  void resolve(Connection connection, String line, RedlockdException error) {
    boolean release;
    lock.lock();
    try {
      resolved = true;
      replyLine = line;
      release = abandoned;
    } finally {
      lock.unlock();
    }
    if (error != null) {
      reply.completeExceptionally(error);
    } else {
      reply.complete(line);
    }
    if (release) {
      connection.releaseAbandoned(this, line);
    }
  }

  /**
   * The caller stopped waiting. Resolved-or-abandoned is decided under one lock, so a grant that
   * arrives while the caller gives up is released exactly once. A second abandon does nothing.
   */
  void abandon(Connection connection) {
    String line;
    lock.lock();
    try {
      if (abandoned) {
        return;
      }
      abandoned = true;
      if (!resolved) {
        return; // the reader releases it when the reply comes
      }
      line = replyLine;
    } finally {
      lock.unlock();
    }
    connection.releaseAbandoned(this, line);
  }
}
