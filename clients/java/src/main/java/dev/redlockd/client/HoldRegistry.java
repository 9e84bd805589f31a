package dev.redlockd.client;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The holds of a client's {@link RedlockdLock}s, counted per thread: the count of a reentrant lock
 * lives with its owner, never on the masters (see proto/CLIENTS.md, reentrancy). Two RedlockdLock
 * objects of one client on one resource share it, as one lock.
 */
final class HoldRegistry {
  /** One thread's hold of one lock: touched only by that thread. */
  static final class Hold {
    final Lease lease;
    int count = 1;

    Hold(Lease lease) {
      this.lease = lease;
    }
  }

  /** A lock (its kind and resources, e.g. "LOCK orders:1") held by one thread. */
  private record Key(String lock, Thread thread) {}

  private final ConcurrentHashMap<Key, Hold> holds = new ConcurrentHashMap<>();

  /** The current thread's hold of the lock, or null. */
  Hold get(String lock) {
    return holds.get(new Key(lock, Thread.currentThread()));
  }

  void add(String lock, Lease lease) {
    holds.put(new Key(lock, Thread.currentThread()), new Hold(lease));
  }

  void remove(String lock) {
    holds.remove(new Key(lock, Thread.currentThread()));
  }
}
