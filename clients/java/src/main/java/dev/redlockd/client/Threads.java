package dev.redlockd.client;

import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** The threads the client starts itself: all daemon threads, so they never keep a JVM alive. */
final class Threads {
  private Threads() {}

  private static final AtomicLong NUMBER = new AtomicLong();

  /**
   * Times the head of each connection's queue (one thread for every client in the process: a check
   * is a few comparisons, and closing a socket never blocks).
   */
  static final ScheduledThreadPoolExecutor TIMER = timer();

  /**
   * Where lost callbacks and the completions of async calls run by default: never on a connection's
   * reader thread, where a callback that calls the client would wait for a reply only that thread
   * can read. Idle threads end after a minute.
   */
  static final ExecutorService CALLBACKS =
      new ThreadPoolExecutor(0, Integer.MAX_VALUE, 60, TimeUnit.SECONDS, new SynchronousQueue<>(),
          task -> daemon("redlockd-callback-" + NUMBER.incrementAndGet(), task));

  private static ScheduledThreadPoolExecutor timer() {
    ScheduledThreadPoolExecutor timer =
        new ScheduledThreadPoolExecutor(1, task -> daemon("redlockd-timer", task));
    timer.setRemoveOnCancelPolicy(true);
    return timer;
  }

  static Thread daemon(String name, Runnable task) {
    Thread thread = new Thread(task, name);
    thread.setDaemon(true);
    return thread;
  }

  /** Runs a task on the executor; if it refuses (shut down), on a thread of its own. */
  static void execute(Executor executor, Runnable task) {
    try {
      executor.execute(task);
    } catch (RejectedExecutionException e) {
      daemon("redlockd-callback-" + NUMBER.incrementAndGet(), task).start();
    }
  }
}
