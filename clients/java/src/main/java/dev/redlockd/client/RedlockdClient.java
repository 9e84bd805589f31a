package dev.redlockd.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * A client of redlockd (protocol v1), safe to share between threads, virtual ones included.
 *
 * <pre>{@code
 * try (RedlockdClient client =
 *     RedlockdClient.builder().addresses("10.0.0.1:7400,10.0.0.2:7400").build()) {
 *   RedlockdLock lock = client.getLock("reports:daily");
 *   lock.lock();
 *   try { ... lock.lease().fence() ... } finally { lock.unlock(); }
 * }
 * }</pre>
 *
 * <p>One client holds one connection at a time (made on first use) and pipelines every call made on
 * it: replies are matched to requests by their order. A reply waits for every earlier one, so a
 * call behind a {@code LOCK ... WAIT} gets its reply when that wait ends (it is executed at once):
 * a caller that must not wait behind others' waits uses a client of its own. When the connection
 * fails, calls in flight throw {@link ConnectionLostException} (never retried: their outcome is
 * unknown), every KEEP lease of the connection is lost, and the next call connects to the next
 * address of the list.
 */
public final class RedlockdClient implements AutoCloseable {
  private final List<Address> addresses;
  private final String secret;
  private final SSLContext tls;
  private final String serverName;
  private final Duration connectTimeout;
  private final Duration requestTimeout;
  private final Executor executor;

  private final ReentrantLock stateLock = new ReentrantLock(); // held while connecting
  private volatile Connection connection; // read without the lock: it is held while connecting
  private int index;
  private boolean closed;

  /** The holds of {@link RedlockdLock}s, counted per thread. */
  final HoldRegistry holds = new HoldRegistry();

  private RedlockdClient(Builder b) {
    this.addresses = List.copyOf(b.addresses);
    this.secret = b.secret;
    this.tls = b.tls;
    this.serverName = b.serverName;
    this.connectTimeout = b.connectTimeout;
    this.requestTimeout = b.requestTimeout;
    this.executor = b.executor;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** How to reach the daemons. */
  public static final class Builder {
    private final List<Address> addresses = new ArrayList<>();
    private String secret;
    private SSLContext tls;
    private String serverName;
    private Duration connectTimeout = Duration.ofSeconds(5);
    private Duration requestTimeout = Duration.ofSeconds(10);
    private Executor executor = Threads.CALLBACKS;

    private Builder() {}

    /**
     * Daemons as {@code host:port} or {@code [v6]:port}, each argument possibly a comma-separated
     * list. Tried in order; after a connection failure the next call connects to the next one.
     */
    public Builder addresses(String... addresses) {
      for (String list : addresses) {
        this.addresses.addAll(Address.parseAll(list));
      }
      return this;
    }

    public Builder addresses(List<String> addresses) {
      return addresses(addresses.toArray(new String[0]));
    }

    /** Sent with {@code AUTH} as the first request of every connection. */
    public Builder secret(String secret) {
      this.secret = Protocol.token(secret, "secret");
      return this;
    }

    /**
     * TLS with this context (its trust store verifies the daemon; its key managers give a client
     * certificate when the daemon asks for one). The certificate must name the address's host (an
     * IP address matching an IP SAN) unless {@link #serverName} says otherwise. {@link RedlockdTls}
     * makes a context from PEM files.
     */
    public Builder tls(SSLContext context) {
      this.tls = Objects.requireNonNull(context, "context");
      return this;
    }

    /** The name the daemon's certificate must carry (and the SNI sent), instead of the host. */
    public Builder serverName(String serverName) {
      this.serverName = Objects.requireNonNull(serverName, "serverName");
      return this;
    }

    /** Bounds connecting, the TLS handshake and AUTH to one address (default 5 s). */
    public Builder connectTimeout(Duration timeout) {
      Protocol.millis(timeout, "connectTimeout", 1);
      this.connectTimeout = timeout;
      return this;
    }

    /**
     * How late a reply may be beyond the WAIT of its request before the daemon counts as hung
     * (default 10 s; zero: no limit). The connection is then closed like a failed one.
     */
    public Builder requestTimeout(Duration timeout) {
      Protocol.millis(timeout, "requestTimeout", 0);
      this.requestTimeout = timeout;
      return this;
    }

    /**
     * Where lost callbacks and the completions of async calls run (default: a pool of daemon
     * threads of this library). Never the connection's reader thread.
     */
    public Builder executor(Executor executor) {
      this.executor = Objects.requireNonNull(executor, "executor");
      return this;
    }

    /** The client; it connects on first use. */
    public RedlockdClient build() {
      if (addresses.isEmpty()) {
        throw new IllegalArgumentException("at least one address is needed");
      }
      return new RedlockdClient(this);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Locks

  /**
   * LOCK, waiting for the reply. Throws {@link LockBusyException} (held elsewhere, after the wait
   * if there was one), {@link NoQuorumException}, {@link ServerException}, {@link
   * ConnectionLostException} or {@link UnavailableException}. Interrupting the thread abandons the
   * request: its reply is still read in its turn and, if it grants the lock, the lock is released.
   */
  public Lease acquire(LockRequest request) throws InterruptedException {
    Call call = request.call();
    Connection c = send(call);
    try {
      return lease(request, call, c, call.reply.get());
    } catch (InterruptedException e) {
      call.abandon(c);
      throw e;
    } catch (ExecutionException e) {
      throw rethrow(e.getCause());
    }
  }

  /** {@link #acquire(LockRequest)} without WAIT or KEEP. */
  public Lease acquire(String resource, Duration ttl) throws InterruptedException {
    return acquire(LockRequest.of(resource, ttl));
  }

  /**
   * LOCK without blocking. Cancelling the future (or completing it yourself) abandons the request:
   * its reply is still read in its turn and, if it grants the lock, the lock is released.
   */
  public CompletableFuture<Lease> acquireAsync(LockRequest request) {
    Call call = request.call();
    return request(call, (reply, ignored, c) -> lease(request, call, c, reply));
  }

  /** For {@link RedlockdLock#lock()}: waits whatever happens; the thread's interrupt flag stays. */
  Lease acquireUninterruptibly(LockRequest request) {
    Call call = request.call();
    Connection c = send(call);
    return lease(request, call, c, join(call.reply));
  }

  private Lease lease(LockRequest request, Call call, Connection c, String reply) {
    Protocol.Grant grant = Protocol.grant(reply, request.resource());
    LostSignal signal =
        call.keepSignal != null ? call.keepSignal : new LostSignal(request.resource(), executor);
    Lease lease = new Lease(this, request.resource(), grant, request.ttlMillis(),
        call.receivedNanos, request.isKeep() ? c : null, signal);
    if (request.lostCallback() != null) {
      signal.onLost(() -> request.lostCallback().accept(lease));
    }
    return lease;
  }

  /**
   * A {@link java.util.concurrent.locks.Lock} on {@code resource}: reentrant per thread, KEEP
   * (renewed by the daemon while held) with a 30 s TTL.
   */
  public RedlockdLock getLock(String resource) {
    return getLock(resource, LockOptions.defaults());
  }

  public RedlockdLock getLock(String resource, LockOptions options) {
    return new RedlockdLock(this, resource, options);
  }

  /** UNLOCK by owner; {@link NotHeldException} when it was no longer held. */
  public void unlock(String resource, String owner) {
    call(Call.of(Protocol.unlock(resource, owner)), unlocked(resource));
  }

  public CompletableFuture<Void> unlockAsync(String resource, String owner) {
    return request(Call.of(Protocol.unlock(resource, owner)), unlocked(resource));
  }

  private static Parser<Void> unlocked(String resource) {
    return (reply, call, c) -> {
      Protocol.ok(reply, resource);
      return null;
    };
  }

  /** EXTEND by owner to {@code ttl} from now; returns the new validity. */
  public Duration extend(String resource, String owner, Duration ttl) {
    return call(Call.of(Protocol.extend(resource, owner, Protocol.millis(ttl, "ttl", 1))),
        extended(resource));
  }

  public CompletableFuture<Duration> extendAsync(String resource, String owner, Duration ttl) {
    return request(Call.of(Protocol.extend(resource, owner, Protocol.millis(ttl, "ttl", 1))),
        extended(resource));
  }

  private static Parser<Duration> extended(String resource) {
    return (reply, call, c) -> Duration.ofMillis(Protocol.extended(reply, resource));
  }

  /** STATUS: whether the resource is locked, read from the masters; never the owner. */
  public Status status(String resource) {
    return call(Call.of(Protocol.status(resource)), statusOf(resource));
  }

  public CompletableFuture<Status> statusAsync(String resource) {
    return request(Call.of(Protocol.status(resource)), statusOf(resource));
  }

  private static Parser<Status> statusOf(String resource) {
    return (reply, call, c) -> Protocol.status(reply, resource);
  }

  // ---------------------------------------------------------------------------------------------
  // The daemon

  public void ping() {
    call(Call.of("PING"), RedlockdClient::pong);
  }

  public CompletableFuture<Void> pingAsync() {
    return request(Call.of("PING"), RedlockdClient::pong);
  }

  private static Void pong(String reply, Call call, Connection c) {
    if (!reply.equals("PONG")) {
      throw Protocol.error(reply, null);
    }
    return null;
  }

  /** HELLO's answer without its {@code OK}: {@code redlockd 0.1.0 proto=1 nodes=5 quorum=3}. */
  public String hello() {
    return call(Call.of("HELLO"), (reply, call, c) -> Protocol.okText(reply));
  }

  /**
   * INFO's document: objects as {@code Map<String, Object>}, integers as {@code Long}, arrays as
   * {@code List<Object>}. Fields may be added; ignore the ones you do not know.
   */
  public Map<String, Object> info() {
    return call(Call.of("INFO"), RedlockdClient::infoOf);
  }

  public CompletableFuture<Map<String, Object>> infoAsync() {
    return request(Call.of("INFO"), RedlockdClient::infoOf);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> infoOf(String reply, Call call, Connection c) {
    Object document = Json.parse(Protocol.okText(reply));
    if (!(document instanceof Map)) {
      throw new ServerException("PROTOCOL", "INFO is not a JSON object");
    }
    return (Map<String, Object>) document;
  }

  /** The daemon the current connection goes to, or null when not connected. */
  public String address() {
    Connection c = liveConnection();
    return c != null ? c.address.toString() : null;
  }

  /** Closes the connection; the daemon then releases this client's KEEP locks (reported lost). */
  @Override
  public void close() {
    Connection c;
    stateLock.lock();
    try {
      closed = true;
      c = connection;
      connection = null;
    } finally {
      stateLock.unlock();
    }
    if (c != null) {
      c.close("connection to " + c.address + " closed by the client");
      c.awaitDead(Duration.ofSeconds(5));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Requests

  /** What a reply means, read on the caller's thread (sync) or the executor (async). */
  @FunctionalInterface
  interface Parser<T> {
    T parse(String reply, Call call, Connection connection);
  }

  /** Sends a call and waits for its reply, uninterruptibly (the interrupt flag stays set). */
  <T> T call(Call call, Parser<T> parser) {
    Connection c = send(call);
    return parser.parse(join(call.reply), call, c);
  }

  /**
   * Sends a call; the reply is parsed on the executor. A future completed by its user (cancelled)
   * before the reply abandons the call.
   */
  <T> CompletableFuture<T> request(Call call, Parser<T> parser) {
    CompletableFuture<T> result = new CompletableFuture<>();
    Connection live = liveConnection();
    if (live != null && live.send(call)) {
      deliver(call, live, parser, result);
    } else {
      // Connecting blocks: never on the caller of an async method.
      Threads.execute(executor, () -> {
        try {
          deliver(call, send(call), parser, result);
        } catch (RuntimeException e) {
          result.completeExceptionally(e);
        }
      });
    }
    return result;
  }

  private <T> void deliver(Call call, Connection c, Parser<T> parser, CompletableFuture<T> result) {
    AtomicBoolean ours = new AtomicBoolean();
    result.whenComplete((value, error) -> {
      if (!ours.get()) {
        call.abandon(c); // cancelled or completed by its user first
      }
    });
    call.reply.whenCompleteAsync((reply, error) -> {
      ours.set(true);
      boolean delivered;
      if (error != null) {
        delivered = result.completeExceptionally(unwrap(error));
      } else {
        try {
          delivered = result.complete(parser.parse(reply, call, c));
        } catch (RuntimeException e) {
          delivered = result.completeExceptionally(e);
        }
      }
      if (!delivered) {
        call.abandon(c); // its user completed it meanwhile: release what it granted
      }
    }, executor);
  }

  private static <T> T join(CompletableFuture<T> future) {
    try {
      return future.join();
    } catch (CompletionException e) {
      throw rethrow(e.getCause());
    }
  }

  static Throwable unwrap(Throwable error) {
    while ((error instanceof CompletionException || error instanceof ExecutionException)
        && error.getCause() != null) {
      error = error.getCause();
    }
    return error;
  }

  private static RuntimeException rethrow(Throwable error) {
    Throwable cause = unwrap(error);
    if (cause instanceof RuntimeException) {
      return (RuntimeException) cause;
    }
    if (cause instanceof Error) {
      throw (Error) cause;
    }
    return new RedlockdException(String.valueOf(cause), cause);
  }

  /**
   * Sends on the current connection, connecting first when there is none. If the connection died
   * just before, the request never left: it goes to the next daemon.
   */
  private Connection send(Call call) {
    Connection c = connection();
    if (c.send(call)) {
      return c;
    }
    c = connection();
    if (c.send(call)) {
      return c;
    }
    throw new ConnectionLostException(
        "connection to " + c.address + " ended before the request was sent");
  }

  private Connection liveConnection() {
    Connection c = connection;
    return c != null && c.isAlive() ? c : null;
  }

  // ---------------------------------------------------------------------------------------------
  // Connections

  private Connection connection() {
    stateLock.lock();
    try {
      if (closed) {
        throw new UnavailableException("the client is closed");
      }
      if (connection != null) {
        if (connection.isAlive()) {
          return connection;
        }
        connection = null;
        index = (index + 1) % addresses.size(); // fail over to the next address
      }
      List<String> problems = new ArrayList<>();
      for (int i = 0; i < addresses.size(); i++) {
        int at = (index + i) % addresses.size();
        Address address = addresses.get(at);
        try {
          connection = open(address);
          index = at;
          return connection;
        } catch (AuthException e) {
          throw e; // a configuration error: the other daemons would say the same
        } catch (IOException | RedlockdException e) {
          problems.add(address + ": " + e);
        }
      }
      throw new UnavailableException("no redlockd reachable: " + String.join("; ", problems));
    } finally {
      stateLock.unlock();
    }
  }

  private Connection open(Address address) throws IOException {
    int timeoutMs = (int) Math.min(Integer.MAX_VALUE, connectTimeout.toMillis());
    Socket raw = new Socket();
    Connection c = null;
    try {
      raw.setTcpNoDelay(true);
      raw.setKeepAlive(true);
      raw.connect(new InetSocketAddress(address.host(), address.port()), timeoutMs);
      Socket socket = raw;
      if (tls != null) {
        String name = serverName != null ? serverName : address.host();
        SSLSocket ssl =
            (SSLSocket) tls.getSocketFactory().createSocket(raw, name, address.port(), true);
        SSLParameters parameters = ssl.getSSLParameters();
        parameters.setEndpointIdentificationAlgorithm("HTTPS"); // verify the host name too
        ssl.setSSLParameters(parameters);
        ssl.setSoTimeout(timeoutMs);
        ssl.startHandshake();
        ssl.setSoTimeout(0);
        socket = ssl;
      }
      c = new Connection(address, raw, socket, requestTimeout, executor);
      handshake(c);
      return c;
    } catch (IOException | RuntimeException e) {
      if (c != null) {
        c.close("handshake with " + address + " failed");
      }
      raw.close();
      throw e;
    }
  }

  /** AUTH (when there is a secret) and HELLO, pipelined: the daemon checks requests in order. */
  private void handshake(Connection c) {
    List<Call> calls = new ArrayList<>();
    if (secret != null) {
      calls.add(Call.of(Protocol.auth(secret)));
    }
    Call hello = Call.of("HELLO");
    calls.add(hello);
    for (Call call : calls) {
      if (!c.send(call)) {
        throw new ConnectionLostException(c.address + " closed the connection at once");
      }
    }
    long end = System.nanoTime() + connectTimeout.toNanos();
    for (Call call : calls) {
      String reply;
      try {
        reply = call.reply.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (TimeoutException e) {
        throw new ConnectionLostException("no answer from " + c.address + " to "
            + call.line.split(" ")[0] + " within " + connectTimeout.toMillis() + " ms");
      } catch (ExecutionException e) {
        throw rethrow(e.getCause());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new UnavailableException("interrupted while connecting to " + c.address);
      }
      if (!reply.equals("OK") && !reply.startsWith("OK ")) {
        throw Protocol.error(reply, null);
      }
      if (call == hello && !Protocol.speaksV1(reply)) {
        throw new ServerException("PROTOCOL", "not a redlockd speaking protocol 1: " + reply);
      }
    }
  }
}
