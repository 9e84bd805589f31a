// Package redlockd is a client for redlockd, the Redlock lock daemon (protocol v1). It uses only
// the standard library.
//
//	c, err := redlockd.Dial(ctx, []string{"127.0.0.1:7400", "127.0.0.1:7410"})
//	lease, err := c.Lock(ctx, "orders:1", redlockd.TTL(10*time.Second), redlockd.Wait(5*time.Second))
//	if err != nil { ... errors.Is(err, redlockd.ErrBusy) ... }
//	defer lease.Unlock(context.Background())
//	write(lease.Fence())
//
// A Client holds one connection at a time and pipelines every call made on it, from any number
// of goroutines: replies are matched to requests by their order, LOST pushes are recognised
// between them. When the connection fails, calls in flight return ErrConnectionLost, every KEEP
// lease of that connection is lost (its Done channel is closed), and the next call connects to
// the next address of the list.
package redlockd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors. Use errors.Is; BusyError, NoQuorumError and ServerError carry the details.
var (
	ErrBusy           = errors.New("redlockd: lock is held by someone else")
	ErrNoQuorum       = errors.New("redlockd: too few masters took part")
	ErrNotHeld        = errors.New("redlockd: lock is not held by this owner")
	ErrAuth           = errors.New("redlockd: authentication refused")
	ErrUnavailable    = errors.New("redlockd: no daemon reachable")
	ErrConnectionLost = errors.New("redlockd: connection lost with the request in flight")
	ErrLost           = errors.New("redlockd: lock lost")
	ErrClosed         = errors.New("redlockd: client closed")
)

// BusyError is the BUSY reply: RetryAfter is the smallest remaining TTL the masters reported.
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string {
	return fmt.Sprintf("redlockd: lock is held by someone else (retry after %v)", e.RetryAfter)
}
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// NoQuorumError is the NOQUORUM reply. Nothing of the attempt is left locked.
type NoQuorumError struct{ Granted, Needed int }

func (e *NoQuorumError) Error() string {
	return fmt.Sprintf("redlockd: no quorum: %d master(s) granted, %d needed", e.Granted, e.Needed)
}
func (e *NoQuorumError) Is(target error) bool { return target == ErrNoQuorum }

// ServerError is an ERR reply: the request was refused and changed nothing.
type ServerError struct{ Code, Message string }

func (e *ServerError) Error() string { return "redlockd: " + e.Code + " " + e.Message }
func (e *ServerError) Is(target error) bool {
	return target == ErrAuth && (e.Code == "NOAUTH" || e.Code == "AUTH_FAILED")
}

func replyError(reply string) error {
	parts := strings.Split(reply, " ")
	switch parts[0] {
	case "BUSY":
		if len(parts) == 2 {
			if ms, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
				return &BusyError{RetryAfter: time.Duration(ms) * time.Millisecond}
			}
		}
	case "NOQUORUM":
		if len(parts) == 3 {
			g, err1 := strconv.Atoi(parts[1])
			n, err2 := strconv.Atoi(parts[2])
			if err1 == nil && err2 == nil {
				return &NoQuorumError{Granted: g, Needed: n}
			}
		}
	case "NOTHELD":
		return ErrNotHeld
	case "ERR":
		if len(parts) >= 2 {
			return &ServerError{Code: parts[1], Message: strings.Join(parts[2:], " ")}
		}
	}
	return &ServerError{Code: "PROTOCOL", Message: fmt.Sprintf("unexpected reply %q", reply)}
}

// ---------------------------------------------------------------------------------------------
// Options

type config struct {
	secret         string
	tls            *tls.Config
	dialTimeout    time.Duration
	requestTimeout time.Duration
}

// Option configures Dial.
type Option func(*config)

// Secret is sent with AUTH on every new connection.
func Secret(secret string) Option { return func(c *config) { c.secret = secret } }

// TLS makes every connection TLS with this configuration (RootCAs, Certificates...). When its
// ServerName is empty, the host of the address is used.
func TLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// DialTimeout bounds connecting, the TLS handshake and AUTH to one address (default 5 s).
func DialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = d } }

// RequestTimeout is how long a reply may take beyond the request's WAIT before the daemon
// counts as hung (default 10 s; 0: wait for ever). The connection is then closed like a failed
// one: calls in flight fail, KEEP leases are lost, the next call fails over.
func RequestTimeout(d time.Duration) Option { return func(c *config) { c.requestTimeout = d } }

type lockConfig struct {
	ttl, wait time.Duration
	hasWait   bool
	keep      bool
}

// LockOption configures Lock.
type LockOption func(*lockConfig)

// TTL of the lock (required), whole milliseconds.
func TTL(d time.Duration) LockOption { return func(l *lockConfig) { l.ttl = d } }

// Wait queues for the lock up to d (LOCK ... WAIT). Cancelling the context also ends the wait.
func Wait(d time.Duration) LockOption {
	return func(l *lockConfig) { l.wait, l.hasWait = d, true }
}

// Keep binds the lock to the connection: the daemon renews it while the connection is open.
// Lease.Done is closed when it is lost (LOST pushed, or the connection failed).
func Keep() LockOption { return func(l *lockConfig) { l.keep = true } }

// ---------------------------------------------------------------------------------------------
// One connection

type result struct {
	reply string
	err   error
}

type call struct {
	line     string
	resource string
	keep     bool
	isLock   bool
	wait     time.Duration // the WAIT it carries: its reply may take that long
	deadline time.Time
	reply    chan result // buffered, 1
	mu       sync.Mutex
	resolved bool
	gone     bool // the caller stopped waiting: the reply is consumed, a granted lock released
	state    *keepState
}

type keepState struct {
	resource, owner string
	done            chan struct{}
	once            sync.Once
	err             error
}

func (k *keepState) lose(err error) {
	k.once.Do(func() {
		k.err = err
		close(k.done)
	})
}

type conn struct {
	addr    string
	nc      net.Conn
	timeout time.Duration
	wmu     sync.Mutex // a request is queued and written under it, so queue order is wire order
	mu      sync.Mutex // pending, keeps, err
	pending []*call
	keeps   map[string]*keepState
	err     error
	dead    chan struct{}
}

func newConn(addr string, nc net.Conn, timeout time.Duration) *conn {
	c := &conn{addr: addr, nc: nc, timeout: timeout, keeps: map[string]*keepState{}, dead: make(chan struct{})}
	go c.readLoop()
	return c
}

func (c *conn) send(k *call) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	if c.timeout > 0 {
		k.deadline = time.Now().Add(c.timeout + k.wait)
		if len(c.pending) == 0 {
			// Only the head can be late: the others' replies come after it. The read deadline
			// follows the head.
			c.nc.SetReadDeadline(k.deadline)
		}
	}
	c.pending = append(c.pending, k)
	c.mu.Unlock()
	if _, err := c.nc.Write([]byte(k.line + "\n")); err != nil {
		// The reader sees the closed socket and fails every call in flight, this one included.
		c.nc.Close()
	}
	return nil
}

// sendNoWait sends a request whose reply nobody waits for; it is still read in its turn. Never
// called on the reader goroutine itself: a write can block until the reader drains replies.
func (c *conn) sendNoWait(line string) {
	go c.send(&call{line: line, reply: make(chan result, 1)})
}

func (c *conn) forgetKeep(owner string) {
	c.mu.Lock()
	delete(c.keeps, owner)
	c.mu.Unlock()
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

func (c *conn) readLoop() {
	r := bufio.NewReaderSize(c.nc, 65536)
	var failure error
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("no reply within %v: daemon hung?", c.timeout)
			}
			failure = fmt.Errorf("%w: %s: %v", ErrConnectionLost, c.addr, err)
			break
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if strings.HasPrefix(line, "LOST ") { // a push, never a reply
			parts := strings.Split(line, " ")
			if len(parts) >= 3 {
				c.mu.Lock()
				k := c.keeps[parts[2]]
				if k != nil && k.resource == parts[1] {
					delete(c.keeps, parts[2])
				} else {
					k = nil
				}
				c.mu.Unlock()
				if k != nil {
					k.lose(fmt.Errorf("%w: the daemon could not renew it (LOST)", ErrLost))
				}
			}
			continue
		}
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.mu.Unlock()
			failure = fmt.Errorf("%w: %s: reply %q with no request waiting", ErrConnectionLost, c.addr, line)
			break
		}
		k := c.pending[0]
		c.pending[0] = nil
		c.pending = c.pending[1:]
		if c.timeout > 0 {
			if len(c.pending) == 0 {
				c.nc.SetReadDeadline(time.Time{}) // idle: only LOST pushes may come
			} else {
				// The new head may have waited behind a slow WAIT: its clock starts now at most.
				next := c.pending[0].deadline
				if least := time.Now().Add(c.timeout); next.Before(least) {
					next = least
				}
				c.nc.SetReadDeadline(next)
			}
		}
		if k.keep && strings.HasPrefix(line, "OK ") {
			// Registered before the next line is read: a LOST may follow right away.
			owner := strings.Split(line, " ")[1]
			k.state = &keepState{resource: k.resource, owner: owner, done: make(chan struct{})}
			c.keeps[owner] = k.state
		}
		c.mu.Unlock()
		c.resolve(k, result{reply: line})
	}
	c.nc.Close()
	c.mu.Lock()
	c.err = failure
	pending, keeps := c.pending, c.keeps
	c.pending, c.keeps = nil, map[string]*keepState{}
	close(c.dead)
	c.mu.Unlock()
	// KEEP leases first: a caller that sees its call fail finds them lost already.
	for _, k := range keeps {
		// A KEEP lock lives exactly as long as its connection: it does not survive a failover.
		k.lose(fmt.Errorf("%w: connection to %s failed: %v", ErrLost, c.addr, failure))
	}
	for _, k := range pending {
		c.resolve(k, result{err: failure})
	}
}

func (c *conn) resolve(k *call, r result) {
	k.mu.Lock()
	k.resolved = true
	gone := k.gone
	k.reply <- r
	k.mu.Unlock()
	if gone {
		c.cleanUp(k, r)
	}
}

// abandon is called when the caller's context ends before the reply came. The reply will still
// come, in its turn; if it grants a lock, the lock is released at once.
func (c *conn) abandon(k *call) {
	k.mu.Lock()
	if !k.resolved {
		k.gone = true
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	c.cleanUp(k, <-k.reply)
}

func (c *conn) cleanUp(k *call, r result) {
	if k.isLock && r.err == nil && strings.HasPrefix(r.reply, "OK ") {
		owner := strings.Split(r.reply, " ")[1]
		c.forgetKeep(owner)
		c.sendNoWait("UNLOCK " + k.resource + " " + owner)
	}
}

// do sends k and waits for its reply. sent is false when the connection was already dead, so
// the request never left and may be sent on another connection.
func (c *conn) do(ctx context.Context, k *call) (reply string, sent bool, err error) {
	if err := c.send(k); err != nil {
		return "", false, err
	}
	select {
	case r := <-k.reply:
		return r.reply, true, r.err
	case <-ctx.Done():
		c.abandon(k)
		return "", true, ctx.Err()
	}
}

// ---------------------------------------------------------------------------------------------
// Client

// Client is a redlockd client, safe for concurrent use.
type Client struct {
	addrs  []string
	cfg    config
	mu     sync.Mutex
	conn   *conn
	index  int
	closed bool
}

// Dial connects to the first reachable daemon of addrs ("host:port"), in order.
func Dial(ctx context.Context, addrs []string, opts ...Option) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("redlockd: no address given")
	}
	c := &Client{addrs: append([]string(nil), addrs...),
		cfg: config{dialTimeout: 5 * time.Second, requestTimeout: 10 * time.Second}}
	for _, o := range opts {
		o(&c.cfg)
	}
	if c.cfg.secret != "" {
		if err := checkToken(c.cfg.secret, "secret"); err != nil {
			return nil, err
		}
	}
	if _, err := c.connection(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Addr is the address of the daemon the current connection goes to ("" when none).
func (c *Client) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && c.conn.alive() {
		return c.conn.addr
	}
	return ""
}

func (c *Client) connection(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.conn != nil {
		if c.conn.alive() {
			return c.conn, nil
		}
		c.conn = nil
		c.index = (c.index + 1) % len(c.addrs) // fail over to the next address
	}
	var problems []string
	for i := range c.addrs {
		index := (c.index + i) % len(c.addrs)
		cn, err := c.open(ctx, c.addrs[index])
		if err != nil {
			if errors.Is(err, ErrAuth) || ctx.Err() != nil {
				return nil, err
			}
			problems = append(problems, c.addrs[index]+": "+err.Error())
			continue
		}
		c.index, c.conn = index, cn
		return cn, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(problems, "; "))
}

func (c *Client) open(ctx context.Context, addr string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if c.cfg.tls != nil {
		cfg := c.cfg.tls.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	cn := newConn(addr, nc, c.cfg.requestTimeout)
	// AUTH and HELLO in one write: the daemon checks requests in order.
	var calls []*call
	if c.cfg.secret != "" {
		calls = append(calls, &call{line: "AUTH " + c.cfg.secret, reply: make(chan result, 1)})
	}
	calls = append(calls, &call{line: "HELLO", reply: make(chan result, 1)})
	for _, k := range calls {
		if err := cn.send(k); err != nil {
			nc.Close()
			return nil, err
		}
	}
	for _, k := range calls {
		var r result
		select {
		case r = <-k.reply:
		case <-ctx.Done():
			nc.Close()
			return nil, ctx.Err()
		}
		if r.err == nil && !strings.HasPrefix(r.reply, "OK") {
			r.err = replyError(r.reply)
		}
		if r.err == nil && k.line == "HELLO" && !strings.Contains(r.reply, " proto=1") {
			r.err = &ServerError{Code: "PROTOCOL", Message: "not a redlockd speaking protocol 1: " + r.reply}
		}
		if r.err != nil {
			nc.Close()
			return nil, r.err
		}
	}
	return cn, nil
}

// Close closes the connection; the daemon then releases this client's KEEP locks.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cn := c.conn
	c.conn = nil
	c.mu.Unlock()
	if cn != nil {
		cn.nc.Close()
		<-cn.dead
	}
	return nil
}

func (c *Client) do(ctx context.Context, k *call) (string, *conn, error) {
	for attempt := 0; ; attempt++ {
		cn, err := c.connection(ctx)
		if err != nil {
			return "", nil, err
		}
		reply, sent, err := cn.do(ctx, k)
		if !sent && attempt == 0 {
			continue // the connection died just before: this request never left, use the next
		}
		return reply, cn, err
	}
}

func checkToken(s, what string) error {
	if len(s) < 1 || len(s) > 256 {
		return fmt.Errorf("redlockd: %s must be 1 to 256 bytes", what)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return fmt.Errorf("redlockd: %s must be printable ASCII without spaces: %q", what, s)
		}
	}
	return nil
}

func millis(d time.Duration) int64 { return int64((d + time.Millisecond/2) / time.Millisecond) }

// Lock takes the lock (LOCK). It returns a *BusyError (errors.Is ErrBusy), a *NoQuorumError, a
// *ServerError or a connection error. Cancelling ctx abandons a pending LOCK: its reply is still
// read in turn and, if it grants the lock, the lock is released.
func (c *Client) Lock(ctx context.Context, resource string, opts ...LockOption) (*Lease, error) {
	var lc lockConfig
	for _, o := range opts {
		o(&lc)
	}
	if err := checkToken(resource, "resource"); err != nil {
		return nil, err
	}
	if lc.ttl <= 0 || millis(lc.ttl) < 1 {
		return nil, errors.New("redlockd: Lock needs a TTL of at least 1 ms")
	}
	line := "LOCK " + resource + " " + strconv.FormatInt(millis(lc.ttl), 10)
	if lc.hasWait {
		if lc.wait < 0 {
			return nil, errors.New("redlockd: negative Wait")
		}
		// A context deadline shorter than the wait caps it: the daemon then gives up about when
		// the caller does, instead of keeping an abandoned waiter queued ahead of others.
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < lc.wait {
			lc.wait = time.Until(deadline)
			if lc.wait < 0 {
				lc.wait = 0
			}
		}
		line += " WAIT " + strconv.FormatInt(millis(lc.wait), 10)
	}
	if lc.keep {
		line += " KEEP"
	}
	k := &call{line: line, resource: resource, keep: lc.keep, isLock: true, wait: lc.wait, reply: make(chan result, 1)}
	reply, cn, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(reply, " ")
	if parts[0] != "OK" || len(parts) != 4 {
		return nil, replyError(reply)
	}
	fence, err1 := strconv.ParseUint(parts[2], 10, 64)
	validity, err2 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, replyError(reply)
	}
	l := &Lease{client: c, resource: resource, owner: parts[1], fence: fence,
		validity: time.Duration(validity) * time.Millisecond, state: k.state}
	l.expires = time.Now().Add(l.validity)
	if lc.keep {
		l.conn = cn
	}
	return l, nil
}

// Unlock releases a lock by its owner (UNLOCK); ErrNotHeld when it was no longer held.
func (c *Client) Unlock(ctx context.Context, resource, owner string) error {
	if err := checkToken(resource, "resource"); err != nil {
		return err
	}
	if err := checkToken(owner, "owner"); err != nil {
		return err
	}
	reply, _, err := c.do(ctx, &call{line: "UNLOCK " + resource + " " + owner, reply: make(chan result, 1)})
	if err != nil {
		return err
	}
	if reply != "OK" {
		return replyError(reply)
	}
	return nil
}

// Extend sets the lock's TTL to ttl from now (EXTEND) and returns the new validity.
func (c *Client) Extend(ctx context.Context, resource, owner string, ttl time.Duration) (time.Duration, error) {
	if err := checkToken(resource, "resource"); err != nil {
		return 0, err
	}
	if err := checkToken(owner, "owner"); err != nil {
		return 0, err
	}
	line := fmt.Sprintf("EXTEND %s %s %d", resource, owner, millis(ttl))
	reply, _, err := c.do(ctx, &call{line: line, reply: make(chan result, 1)})
	if err != nil {
		return 0, err
	}
	parts := strings.Split(reply, " ")
	if parts[0] == "OK" && len(parts) == 2 {
		if ms, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	return 0, replyError(reply)
}

// Status is the STATUS of a resource, read from the masters (never its owner).
type Status struct {
	// Held: a LOCK now would be refused.
	Held bool
	// Remaining is how long at least before a LOCK could succeed, unless the holder releases
	// the lock; 0 when it is free.
	Remaining time.Duration
}

// Status asks whether resource is locked (STATUS). It returns a *NoQuorumError when too few
// masters answered to say.
func (c *Client) Status(ctx context.Context, resource string) (Status, error) {
	if err := checkToken(resource, "resource"); err != nil {
		return Status{}, err
	}
	reply, _, err := c.do(ctx, &call{line: "STATUS " + resource, reply: make(chan result, 1)})
	if err != nil {
		return Status{}, err
	}
	return parseStatus(reply)
}

// parseStatus reads STATUS's "OK HELD <pttl_ms>" or "OK FREE".
func parseStatus(reply string) (Status, error) {
	parts := strings.Split(reply, " ")
	if len(parts) == 3 && parts[0] == "OK" && parts[1] == "HELD" {
		if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil && ms >= 0 {
			return Status{Held: true, Remaining: time.Duration(ms) * time.Millisecond}, nil
		}
	}
	if reply == "OK FREE" {
		return Status{}, nil
	}
	return Status{}, replyError(reply)
}

// Ping sends PING.
func (c *Client) Ping(ctx context.Context) error {
	reply, _, err := c.do(ctx, &call{line: "PING", reply: make(chan result, 1)})
	if err == nil && reply != "PONG" {
		err = replyError(reply)
	}
	return err
}

// Info returns the daemon's INFO document.
func (c *Client) Info(ctx context.Context) (map[string]any, error) {
	reply, _, err := c.do(ctx, &call{line: "INFO", reply: make(chan result, 1)})
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(reply, "OK ") {
		return nil, replyError(reply)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(reply[3:]), &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// ---------------------------------------------------------------------------------------------
// Lease

// Lease is a lock held through redlockd.
type Lease struct {
	client   *Client
	resource string
	owner    string
	fence    uint64
	validity time.Duration
	expires  time.Time
	state    *keepState // KEEP locks only
	conn     *conn
	mu       sync.Mutex
	released bool
}

// Resource is the locked resource.
func (l *Lease) Resource() string { return l.resource }

// Owner is the capability to unlock or extend the lock: treat it like a password.
func (l *Lease) Owner() string { return l.owner }

// Fence is the fencing token: pass it to the storage, which must refuse smaller ones.
func (l *Lease) Fence() uint64 { return l.fence }

// Validity is how long the lock was guaranteed when the reply was written (or the last Extend).
func (l *Lease) Validity() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validity
}

// Expires is when the guaranteed validity ends, measured from when the reply was read.
func (l *Lease) Expires() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expires
}

// Done is closed when a KEEP lock is lost: LOST pushed, or its connection failed. For a lock
// without KEEP it is nil (never ready), like context.Background().Done(): watch Expires.
func (l *Lease) Done() <-chan struct{} {
	if l.state == nil {
		return nil
	}
	return l.state.done
}

// Err is nil until Done is closed, then says why the lock was lost (errors.Is ErrLost).
func (l *Lease) Err() error {
	if l.state == nil {
		return nil
	}
	select {
	case <-l.state.done:
		return l.state.err
	default:
		return nil
	}
}

// Extend sets the TTL to ttl from now and returns the new validity.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) (time.Duration, error) {
	v, err := l.client.Extend(ctx, l.resource, l.owner, ttl)
	if err == nil {
		l.mu.Lock()
		l.validity, l.expires = v, time.Now().Add(v)
		l.mu.Unlock()
	}
	return v, err
}

// Unlock releases the lock. It returns ErrNotHeld if the lock had run out, unless it had been
// reported lost through Done already. A second call does nothing.
func (l *Lease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	if l.conn != nil {
		l.conn.forgetKeep(l.owner)
	}
	err := l.client.Unlock(ctx, l.resource, l.owner)
	if err != nil && l.Err() != nil && (errors.Is(err, ErrNotHeld) || errors.Is(err, ErrConnectionLost) ||
		errors.Is(err, ErrUnavailable)) {
		return nil
	}
	return err
}
