package dev.redlockd.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Whether a lease is lost, and who to tell: set at most once, by the reader thread (a LOST push, a
 * failed connection) or by a re-entry that found the lock no longer held. The flag is set before
 * anything is told; callbacks and the future's completion run on the executor, never on the reader.
 */
final class LostSignal {
  final String resource;
  private final Executor executor;
  private final ReentrantLock lock = new ReentrantLock();
  private final CompletableFuture<LockLostException> future = new CompletableFuture<>();
  private List<Runnable> callbacks = new ArrayList<>();
  private volatile LockLostException cause;

  LostSignal(String resource, Executor executor) {
    this.resource = resource;
    this.executor = executor;
  }

  boolean isLost() {
    return cause != null;
  }

  LockLostException cause() {
    return cause;
  }

  /** A copy: callers cannot complete the signal themselves. */
  CompletableFuture<LockLostException> future() {
    return future.copy();
  }

  void onLost(Runnable callback) {
    lock.lock();
    try {
      if (cause == null) {
        callbacks.add(callback);
        return;
      }
    } finally {
      lock.unlock();
    }
    Threads.execute(executor, callback);
  }

  /** After a release: a LOST for a released lock is no news. */
  void detach() {
    lock.lock();
    try {
      callbacks = new ArrayList<>();
    } finally {
      lock.unlock();
    }
  }

  void markLost(LockLostException why) {
    List<Runnable> toCall;
    lock.lock();
    try {
      if (cause != null) {
        return;
      }
      cause = why;
      toCall = callbacks;
      callbacks = new ArrayList<>();
    } finally {
      lock.unlock();
    }
    Threads.execute(executor, () -> future.complete(why));
    for (Runnable callback : toCall) {
      Threads.execute(executor, callback);
    }
  }
}
