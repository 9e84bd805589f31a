package dev.redlockd.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One connection to one daemon (plain or TLS), shared by every caller of a client. Requests are
 * pipelined: each is appended to a queue and written under one lock, so the order of the queue is
 * the order of the bytes on the wire, and one reader thread hands each reply line to the head of
 * the queue. {@code LOST} pushes are recognised between replies. When the connection fails, every
 * KEEP lock on it is reported lost, then every call in flight fails with {@link
 * ConnectionLostException}.
 *
 * <p>Only {@link ReentrantLock}s, never {@code synchronized}: callers may be virtual threads, which
 * a monitor held around blocking I/O would pin to their carrier.
 */
final class Connection {
  private static final int MAX_LINE = 1 << 20;

  final Address address;
  private final Socket raw; // the TCP socket: closing it never blocks, even under TLS
  private final InputStream in;
  private final OutputStream out;
  private final long timeoutNanos; // how late a reply may be beyond its WAIT; 0: no limit
  private final Executor executor;

  private final ReentrantLock writeLock = new ReentrantLock(); // queue order is wire order
  private final ReentrantLock lock = new ReentrantLock(); // everything below
  private final ArrayDeque<Call> pending = new ArrayDeque<>();
  private final Map<String, LostSignal> keeps = new HashMap<>(); // owner -> its KEEP lock
  private RedlockdException failure; // set once the connection is dead
  private String closeReason; // set when this side closes it (client closed, daemon hung)
  private long headDeadline;
  private ScheduledFuture<?> timer;
  private long timerAt;
  private final CountDownLatch dead = new CountDownLatch(1);

  /** Starts the reader on a connected (and, for TLS, handshaken) socket. */
  Connection(Address address, Socket raw, Socket socket, Duration timeout, Executor executor)
      throws IOException {
    this.address = address;
    this.raw = raw;
    this.in = socket.getInputStream();
    this.out = socket.getOutputStream();
    this.timeoutNanos = timeout.toNanos();
    this.executor = executor;
    Threads.daemon("redlockd-reader-" + address, this::readLoop).start();
  }

  boolean isAlive() {
    lock.lock();
    try {
      return failure == null && closeReason == null;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Queues and writes one request. False when the connection was dead already: the request never
   * left and may go to another daemon. A write that fails closes the socket, and the reader then
   * fails every call in flight, this one included.
   */
  boolean send(Call call) {
    byte[] bytes = (call.line + "\n").getBytes(StandardCharsets.US_ASCII);
    writeLock.lock();
    try {
      lock.lock();
      try {
        if (failure != null || closeReason != null) {
          return false;
        }
        if (timeoutNanos > 0) {
          call.deadline = System.nanoTime() + timeoutNanos + call.waitNanos;
          if (pending.isEmpty()) {
            timeHead(call.deadline);
          }
        }
        pending.addLast(call);
      } finally {
        lock.unlock();
      }
      try {
        out.write(bytes);
        out.flush();
      } catch (IOException e) {
        closeSocket();
      }
      return true;
    } finally {
      writeLock.unlock();
    }
  }

  /** A request whose reply nobody waits for; it is still read in its turn. Never on the reader. */
  void sendNoWait(String line) {
    Threads.execute(executor, () -> send(Call.of(line)));
  }

  void forgetKeep(String owner) {
    lock.lock();
    try {
      keeps.remove(owner);
    } finally {
      lock.unlock();
    }
  }

  /** A caller gave up on a LOCK: if its reply granted the lock, nobody holds it, so release it. */
  void releaseAbandoned(Call call, String reply) {
    String owner = call.isLock() && reply != null ? Protocol.grantOwner(reply) : null;
    if (owner != null) {
      forgetKeep(owner);
      sendNoWait(call.releasePrefix + owner);
    }
  }

  /** Closes the connection; calls in flight fail with the reason, KEEP locks are lost. */
  void close(String reason) {
    lock.lock();
    try {
      if (failure == null && closeReason == null) {
        closeReason = reason;
      }
    } finally {
      lock.unlock();
    }
    closeSocket();
  }

  /** Waits (up to the timeout) until the reader has failed every call and lost every KEEP lock. */
  void awaitDead(Duration timeout) {
    boolean interrupted = false;
    long end = System.nanoTime() + timeout.toNanos();
    while (true) {
      try {
        dead.await(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private void closeSocket() {
    try {
      raw.close();
    } catch (IOException e) {
      // closed is closed
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The head of the queue is timed, and only the head: the others' replies come after it. A call
  // behind a long WAIT is not late while the WAIT is pending; when it becomes the head, its clock
  // restarts if needed (max(own deadline, now + timeout)).

  /** Under lock: the head's deadline is now this; arm the timer if it would fire later. */
  private void timeHead(long deadline) {
    headDeadline = deadline;
    if (timer != null && timerAt - deadline <= 0) {
      return; // it fires first and checks again then
    }
    if (timer != null) {
      timer.cancel(false);
    }
    timerAt = deadline;
    timer = Threads.TIMER.schedule(
        this::checkHead, Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
  }

  private void checkHead() {
    lock.lock();
    try {
      timer = null;
      if (failure != null || closeReason != null || pending.isEmpty()) {
        return;
      }
      if (headDeadline - System.nanoTime() > 0) {
        timeHead(headDeadline);
        return;
      }
      closeReason = "no reply from " + address + " within "
          + Duration.ofNanos(timeoutNanos).toMillis() + " ms beyond its WAIT: daemon hung?";
    } finally {
      lock.unlock();
    }
    closeSocket();
  }

  // ---------------------------------------------------------------------------------------------
  // The reader

  private void readLoop() {
    String problem;
    try {
      LineReader lines = new LineReader(in);
      while (true) {
        String line = lines.next();
        if (line == null) {
          problem = address + " closed the connection";
          break;
        }
        if (!handle(line)) {
          problem =
              "reply " + Protocol.printable(line) + " from " + address + " with no request waiting";
          break;
        }
      }
    } catch (IOException | RuntimeException e) {
      problem = "connection to " + address + " failed: " + e;
    }
    shut(problem);
  }

  /**
   * One line: a push, or the reply to the head of the queue. False for a reply nobody asked for.
   */
  private boolean handle(String line) {
    if (Protocol.isPush(line)) {
      String[] lost = Protocol.lost(line);
      LostSignal signal = null;
      if (lost != null) {
        lock.lock();
        try {
          signal = keeps.get(lost[1]);
          if (signal != null && signal.resource.equals(lost[0])) {
            keeps.remove(lost[1]);
          } else {
            signal = null; // released, abandoned, or not ours: no news
          }
        } finally {
          lock.unlock();
        }
      }
      if (signal != null) {
        signal.markLost(
            new LockLostException("the daemon could not renew the lock on " + lost[0] + " (LOST)"));
      }
      return true;
    }
    Call call;
    lock.lock();
    try {
      call = pending.pollFirst();
      if (call == null) {
        return false;
      }
      call.receivedNanos = System.nanoTime();
      Call next = pending.peekFirst();
      if (timeoutNanos > 0 && next != null) {
        long least = System.nanoTime() + timeoutNanos;
        timeHead(next.deadline - least > 0 ? next.deadline : least);
      }
      String owner = call.keep ? Protocol.grantOwner(line) : null;
      if (owner != null) {
        // Registered before the next line is read: a LOST for it may follow right away.
        call.keepSignal = new LostSignal(call.resource, executor);
        keeps.put(owner, call.keepSignal);
      }
    } finally {
      lock.unlock();
    }
    call.resolve(this, line, null);
    return true;
  }

  private void shut(String problem) {
    closeSocket();
    RedlockdException error;
    List<Call> calls;
    List<LostSignal> lost;
    lock.lock();
    try {
      error = new ConnectionLostException(closeReason != null ? closeReason : problem);
      failure = error;
      calls = new ArrayList<>(pending);
      pending.clear();
      lost = new ArrayList<>(keeps.values());
      keeps.clear();
      if (timer != null) {
        timer.cancel(false);
        timer = null;
      }
    } finally {
      lock.unlock();
    }
    // KEEP locks first, so that a caller whose call fails finds them lost already. A KEEP lock
    // lives exactly as long as its connection: it does not survive a failover.
    for (LostSignal signal : lost) {
      signal.markLost(new LockLostException("the connection holding the lock on " + signal.resource
          + " ended: " + error.getMessage()));
    }
    for (Call call : calls) {
      call.resolve(this, null, error);
    }
    dead.countDown();
  }

  /** Splits the stream into lines (LF, a CR before it dropped), ASCII. */
  private static final class LineReader {
    private final InputStream in;
    private final byte[] buffer = new byte[65536];
    private int start;
    private int end;
    private byte[] line = new byte[256];

    LineReader(InputStream in) {
      this.in = in;
    }

    String next() throws IOException {
      int length = 0;
      while (true) {
        if (start == end) {
          int n = in.read(buffer);
          if (n < 0) {
            return null;
          }
          start = 0;
          end = n;
        }
        while (start < end) {
          byte b = buffer[start++];
          if (b == '\n') {
            if (length > 0 && line[length - 1] == '\r') {
              length--;
            }
            return new String(line, 0, length, StandardCharsets.ISO_8859_1);
          }
          if (length == line.length) {
            if (length >= MAX_LINE) {
              throw new IOException("a line longer than " + MAX_LINE + " bytes");
            }
            line = java.util.Arrays.copyOf(line, length * 2);
          }
          line[length++] = b;
        }
      }
    }
  }
}
