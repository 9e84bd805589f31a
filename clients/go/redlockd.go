// Package redlockd is a client for redlockd, the Redlock lock daemon (protocol v1.1). It uses
// only the standard library.
//
//	c, err := redlockd.Dial(ctx, []string{"127.0.0.1:7400", "127.0.0.1:7410"})
//	lease, err := c.Lock(ctx, "orders:1", redlockd.TTL(10*time.Second), redlockd.Wait(5*time.Second))
//	if err != nil { ... errors.Is(err, redlockd.ErrBusy) ... }
//	defer lease.Unlock(context.Background())
//	write(lease.Fence())
//
// The lock family: Lock(ctx, r, TTL(d), Shared()) takes a shared (read) hold, Lock(ctx, r,
// TTL(d), Permits(n)) one of n permits of the semaphore r, and LockMany(ctx, []string{r1, r2},
// TTL(d)) every resource at once or none; each returns a Lease whose Unlock and Extend fit them.
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
	// ErrPermitsMismatch: ERR PERMITS_MISMATCH, the semaphore's permits in use were taken with
	// another number of permits (a *ServerError with that Code).
	ErrPermitsMismatch = errors.New("redlockd: another number of permits is in force")
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
	return target == ErrAuth && (e.Code == "NOAUTH" || e.Code == "AUTH_FAILED") ||
		target == ErrPermitsMismatch && e.Code == "PERMITS_MISMATCH"
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
	shared    bool
	permits   int
	label     string
	maxHold   time.Duration
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

// Shared takes a shared (read) hold (LOCK ... SHARED): any number of them at once, none while an
// exclusive lock or a set holds the resource, or while an exclusive waiter waits for it.
func Shared() LockOption { return func(l *lockConfig) { l.shared = true } }

// Permits takes one of n permits of the semaphore named by the resource (LOCK ... PERMITS n). A
// semaphore and a lock of the same name are different things. Every request for one semaphore
// names the same n while any of its permits lives, else ErrPermitsMismatch.
func Permits(n int) LockOption { return func(l *lockConfig) { l.permits = n } }

// Label names the holder in STATUS and LIST (1 to 64 printable ASCII bytes, no spaces).
func Label(label string) LockOption { return func(l *lockConfig) { l.label = label } }

// MaxHold (with Keep only) makes the daemon renew the lock for at most d from the grant; then
// it is lost as when a renewal fails.
func MaxHold(d time.Duration) LockOption { return func(l *lockConfig) { l.maxHold = d } }

// Kind is what a Lease holds; the owner says it too.
type Kind string

// The kinds of lock.
const (
	KindExclusive Kind = "exclusive"
	KindShared    Kind = "shared"
	KindPermit    Kind = "permit"
	KindSet       Kind = "set"
)

// ---------------------------------------------------------------------------------------------
// One connection

type result struct {
	reply string
	err   error
}

type call struct {
	line     string
	release  string // what releases a grant of this LOCK or MLOCK, without the owner
	resource string // the resource a LOST push names (a set's first)
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
		release := k.release
		if release == "" {
			release = "UNLOCK " + k.resource
		}
		c.sendNoWait(release + " " + owner)
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

// Lock takes the lock (LOCK): exclusive, or with Shared() a shared hold, or with Permits(n) a
// permit of a semaphore. It returns a *BusyError (errors.Is ErrBusy), a *NoQuorumError, a
// *ServerError (errors.Is ErrPermitsMismatch, ErrAuth) or a connection error. Cancelling ctx
// abandons a pending LOCK: its reply is still read in turn and, if it grants the lock, the lock
// is released.
func (c *Client) Lock(ctx context.Context, resource string, opts ...LockOption) (*Lease, error) {
	var lc lockConfig
	for _, o := range opts {
		o(&lc)
	}
	if err := checkToken(resource, "resource"); err != nil {
		return nil, err
	}
	kind := KindExclusive
	line := "LOCK " + resource + " %s"
	switch {
	case lc.shared && lc.permits != 0:
		return nil, errors.New("redlockd: a lock is Shared or a permit of a semaphore, not both")
	case lc.shared:
		kind, line = KindShared, line+" SHARED"
	case lc.permits < 0:
		return nil, fmt.Errorf("redlockd: Permits must be at least 1, got %d", lc.permits)
	case lc.permits > 0:
		kind, line = KindPermit, line+" PERMITS "+strconv.Itoa(lc.permits)
	}
	return c.lock(ctx, line, []string{resource}, kind, lc)
}

// LockMany takes every resource at once or none (MLOCK): no deadlock whatever the order, one
// owner and one fencing token for the set. Each resource is named once. The Lease unlocks and
// extends the whole set; a KEEP set's LOST names its first resource. Errors as Lock's.
func (c *Client) LockMany(ctx context.Context, resources []string, opts ...LockOption) (*Lease, error) {
	var lc lockConfig
	for _, o := range opts {
		o(&lc)
	}
	if err := checkResources(resources); err != nil {
		return nil, err
	}
	if lc.shared || lc.permits != 0 {
		return nil, errors.New("redlockd: a set of resources is exclusive: no Shared or Permits")
	}
	line := "MLOCK " + strconv.Itoa(len(resources)) + " " + strings.Join(resources, " ") + " %s"
	return c.lock(ctx, line, append([]string(nil), resources...), KindSet, lc)
}

func checkResources(resources []string) error {
	if len(resources) == 0 {
		return errors.New("redlockd: at least one resource is needed")
	}
	seen := map[string]bool{}
	for _, r := range resources {
		if err := checkToken(r, "resource"); err != nil {
			return err
		}
		if seen[r] {
			return fmt.Errorf("redlockd: each resource may be named once: %q", r)
		}
		seen[r] = true
	}
	return nil
}

// lock sends a LOCK or MLOCK whose line has "%s" where the TTL goes, followed by the options.
func (c *Client) lock(ctx context.Context, line string, resources []string, kind Kind, lc lockConfig) (*Lease, error) {
	if lc.ttl <= 0 || millis(lc.ttl) < 1 {
		return nil, errors.New("redlockd: Lock needs a TTL of at least 1 ms")
	}
	line = strings.Replace(line, "%s", strconv.FormatInt(millis(lc.ttl), 10), 1)
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
	if lc.label != "" {
		if len(lc.label) > 64 {
			return nil, errors.New("redlockd: a Label is 1 to 64 bytes")
		}
		if err := checkToken(lc.label, "label"); err != nil {
			return nil, err
		}
		line += " LABEL " + lc.label
	}
	if lc.maxHold != 0 {
		if !lc.keep || millis(lc.maxHold) < 1 {
			return nil, errors.New("redlockd: MaxHold needs Keep and at least 1 ms")
		}
		line += " MAXHOLD " + strconv.FormatInt(millis(lc.maxHold), 10)
	}
	release := "UNLOCK " + resources[0]
	if kind == KindSet {
		release = "MUNLOCK " + strconv.Itoa(len(resources)) + " " + strings.Join(resources, " ")
	}
	k := &call{line: line, release: release, resource: resources[0], keep: lc.keep, isLock: true, wait: lc.wait, reply: make(chan result, 1)}
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
	l := &Lease{client: c, resource: resources[0], resources: resources, kind: kind, permits: lc.permits,
		ttl: time.Duration(millis(lc.ttl)) * time.Millisecond, owner: parts[1], fence: fence,
		validity: time.Duration(validity) * time.Millisecond, state: k.state}
	l.expires = time.Now().Add(l.validity)
	if lc.keep {
		l.conn = cn
	}
	return l, nil
}

// UnlockMany releases these resources of a set by its owner (MUNLOCK: all of them, or fewer);
// ErrNotHeld when fewer than a majority held them.
func (c *Client) UnlockMany(ctx context.Context, resources []string, owner string) error {
	if err := checkResources(resources); err != nil {
		return err
	}
	if err := checkToken(owner, "owner"); err != nil {
		return err
	}
	line := fmt.Sprintf("MUNLOCK %d %s %s", len(resources), strings.Join(resources, " "), owner)
	reply, _, err := c.do(ctx, &call{line: line, reply: make(chan result, 1)})
	if err != nil {
		return err
	}
	if reply != "OK" {
		return replyError(reply)
	}
	return nil
}

// ExtendMany sets the TTL of these resources of a set to ttl from now (MEXTEND) and returns the
// new validity.
func (c *Client) ExtendMany(ctx context.Context, resources []string, owner string, ttl time.Duration) (time.Duration, error) {
	if err := checkResources(resources); err != nil {
		return 0, err
	}
	if err := checkToken(owner, "owner"); err != nil {
		return 0, err
	}
	line := fmt.Sprintf("MEXTEND %d %s %s %d", len(resources), strings.Join(resources, " "), owner, millis(ttl))
	return c.extend(ctx, line)
}

// Unlock releases a lock of any kind by its owner (UNLOCK); ErrNotHeld when it was no longer
// held. A set's owner releases that one resource of the set.
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

// Extend sets the TTL of a lock of any kind to ttl from now (EXTEND) and returns the new
// validity.
func (c *Client) Extend(ctx context.Context, resource, owner string, ttl time.Duration) (time.Duration, error) {
	if err := checkToken(resource, "resource"); err != nil {
		return 0, err
	}
	if err := checkToken(owner, "owner"); err != nil {
		return 0, err
	}
	return c.extend(ctx, fmt.Sprintf("EXTEND %s %s %d", resource, owner, millis(ttl)))
}

func (c *Client) extend(ctx context.Context, line string) (time.Duration, error) {
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

// Status is the STATUS of a resource, read from the masters (never its owner): the lock, its
// shared holders and the semaphore of the same name.
type Status struct {
	// Held: an exclusive LOCK now would be refused.
	Held bool
	// Remaining is how long at least before a LOCK could succeed, unless the holder releases
	// the lock; 0 when it is free.
	Remaining time.Duration
	// Label is the holder's LABEL, when its LOCK gave one (never the owner).
	Label string
	// Readers is the number of shared holders (0 when none).
	Readers int
	// PermitsUsed of Permits of the semaphore of that name are in use (both 0 when none is).
	PermitsUsed, Permits int
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

// parseStatus reads STATUS's "OK HELD <pttl_ms> [field=value...]" or "OK FREE [field=value...]",
// the fields label=, readers= and permits=<used>/<n> in any order (others are ignored).
func parseStatus(reply string) (Status, error) {
	parts := strings.Split(reply, " ")
	var s Status
	fields := parts[min(2, len(parts)):]
	if len(parts) >= 3 && parts[0] == "OK" && parts[1] == "HELD" {
		ms, err := strconv.ParseUint(parts[2], 10, 63)
		if err != nil {
			return Status{}, replyError(reply)
		}
		s.Held, s.Remaining, fields = true, time.Duration(ms)*time.Millisecond, parts[3:]
	} else if len(parts) < 2 || parts[0] != "OK" || parts[1] != "FREE" {
		return Status{}, replyError(reply)
	}
	bad := &ServerError{Code: "PROTOCOL", Message: fmt.Sprintf("unexpected reply %q", reply)}
	for _, field := range fields {
		name, value, ok := strings.Cut(field, "=")
		if !ok {
			return Status{}, bad
		}
		var err error
		switch name {
		case "label":
			s.Label = value
		case "readers":
			s.Readers, err = strconv.Atoi(value)
		case "permits":
			used, total, found := strings.Cut(value, "/")
			s.PermitsUsed, err = strconv.Atoi(used)
			if err == nil {
				s.Permits, err = strconv.Atoi(total)
			}
			if !found {
				err = bad
			}
		}
		if err != nil {
			return Status{}, bad
		}
	}
	return s, nil
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// ListedLock is one resource LIST found held on a majority of the masters (never its owner).
type ListedLock struct {
	Resource string
	Kind     string // "exclusive" (protocol 1.1 may list other kinds)
	// Remaining is how long at least the hold lasts, as Status.Remaining.
	Remaining time.Duration
	Labels    []string
}

// Listing is LIST's answer: the locks, sorted by resource, and whether more were left out.
type Listing struct {
	Locks     []ListedLock
	Truncated bool
}

// List returns the resources held on a majority of the masters (through any daemon) whose
// names start with prefix (LIST), at most count (0: the daemon's default 100; it clamps to
// 1000), with their kind, time left and labels; never an owner.
func (c *Client) List(ctx context.Context, prefix string, count int) (Listing, error) {
	line := "LIST"
	if prefix != "" {
		if err := checkToken(prefix, "prefix"); err != nil {
			return Listing{}, err
		}
		line += " " + prefix
	}
	if count < 0 {
		return Listing{}, fmt.Errorf("redlockd: count must not be negative, got %d", count)
	}
	if count > 0 {
		line += " COUNT " + strconv.Itoa(count)
	}
	reply, _, err := c.do(ctx, &call{line: line, reply: make(chan result, 1)})
	if err != nil {
		return Listing{}, err
	}
	return parseListing(reply)
}

// parseListing reads LIST's "OK <json>".
func parseListing(reply string) (Listing, error) {
	if !strings.HasPrefix(reply, "OK {") {
		return Listing{}, replyError(reply)
	}
	var body struct {
		Locks []struct {
			Resource string   `json:"resource"`
			Kind     string   `json:"kind"`
			TTLMs    int64    `json:"ttl_ms"`
			Labels   []string `json:"labels"`
		} `json:"locks"`
		Truncated bool `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(reply[3:]), &body); err != nil {
		return Listing{}, fmt.Errorf("redlockd: unexpected reply to LIST: %w", err)
	}
	out := Listing{Locks: make([]ListedLock, 0, len(body.Locks)), Truncated: body.Truncated}
	for _, l := range body.Locks {
		out.Locks = append(out.Locks, ListedLock{l.Resource, l.Kind,
			time.Duration(l.TTLMs) * time.Millisecond, l.Labels})
	}
	return out, nil
}

// Ping sends PING.
func (c *Client) Ping(ctx context.Context) error {
	reply, _, err := c.do(ctx, &call{line: "PING", reply: make(chan result, 1)})
	if err == nil && reply != "PONG" {
		err = replyError(reply)
	}
	return err
}

// Hello returns HELLO's answer without its OK: "redlockd <version> proto=1.1 nodes=N quorum=Q"
// (proto=1 before the lock family).
func (c *Client) Hello(ctx context.Context) (string, error) {
	reply, _, err := c.do(ctx, &call{line: "HELLO", reply: make(chan result, 1)})
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(reply, "OK ") {
		return "", replyError(reply)
	}
	return reply[3:], nil
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

// Lease is a lock held through redlockd: an exclusive lock, a shared hold, a permit of a
// semaphore or a set of resources (Kind).
type Lease struct {
	client    *Client
	resource  string
	resources []string
	kind      Kind
	permits   int
	ttl       time.Duration
	owner     string
	fence     uint64
	validity  time.Duration
	expires   time.Time
	state     *keepState // KEEP locks only
	conn      *conn
	mu        sync.Mutex
	released  bool
}

// Resource is the locked resource (a set's first).
func (l *Lease) Resource() string { return l.resource }

// Resources are every resource held: a set's, in the order LockMany named them.
func (l *Lease) Resources() []string { return append([]string(nil), l.resources...) }

// Kind is what the lease holds: KindExclusive, KindShared, KindPermit or KindSet.
func (l *Lease) Kind() Kind { return l.kind }

// Permits is a permit's semaphore size (0 for other kinds).
func (l *Lease) Permits() int { return l.permits }

// Slot is which slot of its semaphore a permit holds (the owner says it); -1 for other kinds.
func (l *Lease) Slot() int {
	if l.kind != KindPermit {
		return -1
	}
	slot, err := strconv.ParseUint(l.owner[5:8], 16, 16)
	if err != nil {
		return -1
	}
	return int(slot)
}

// TTL is the TTL the masters last set (the Lock's, or the last Extend's).
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

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

// Extend sets the TTL to ttl from now (MEXTEND for a set) and returns the new validity.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) (time.Duration, error) {
	var v time.Duration
	var err error
	if l.kind == KindSet {
		v, err = l.client.ExtendMany(ctx, l.resources, l.owner, ttl)
	} else {
		v, err = l.client.Extend(ctx, l.resource, l.owner, ttl)
	}
	if err == nil {
		l.mu.Lock()
		l.validity, l.expires, l.ttl = v, time.Now().Add(v), time.Duration(millis(ttl))*time.Millisecond
		l.mu.Unlock()
	}
	return v, err
}

// Unlock releases the lock (MUNLOCK for a set). It returns ErrNotHeld if the lock had run out,
// unless it had been reported lost through Done already. A second call does nothing.
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
	var err error
	if l.kind == KindSet {
		err = l.client.UnlockMany(ctx, l.resources, l.owner)
	} else {
		err = l.client.Unlock(ctx, l.resource, l.owner)
	}
	if err != nil && l.Err() != nil && (errors.Is(err, ErrNotHeld) || errors.Is(err, ErrConnectionLost) ||
		errors.Is(err, ErrUnavailable)) {
		return nil
	}
	return err
}
