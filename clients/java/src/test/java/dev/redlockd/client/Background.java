package dev.redlockd.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** A body run on a platform thread of its own, for the tests that wait, interrupt or compete. */
final class Background {
  interface Body {
    void run() throws Exception;
  }

  final Thread thread;
  private final CompletableFuture<Void> done = new CompletableFuture<>();

  Background(Body body) {
    thread = new Thread(() -> {
      try {
        body.run();
        done.complete(null);
      } catch (Throwable e) {
        done.completeExceptionally(e);
      }
    });
    thread.start();
  }

  /** What the body threw (null: nothing), once it ended; an AssertionError if it is stuck. */
  Throwable thrown() throws InterruptedException {
    try {
      done.get(120, TimeUnit.SECONDS);
      return null;
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (TimeoutException e) {
      throw new AssertionError("the background thread is stuck", e);
    }
  }
}
