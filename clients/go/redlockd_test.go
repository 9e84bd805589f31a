package redlockd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

func dial(t *testing.T, addrs []string, opts ...redlockd.Option) *redlockd.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redlockd.Dial(ctx, addrs, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func bg() context.Context { return context.Background() }

func mustLock(t *testing.T, c *redlockd.Client, resource string, opts ...redlockd.LockOption) *redlockd.Lease {
	t.Helper()
	l, err := c.Lock(bg(), resource, opts...)
	if err != nil {
		t.Fatalf("Lock %s: %v", resource, err)
	}
	return l
}

func TestLockUnlockAndContention(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	a, b := dial(t, []string{d.addr()}), dial(t, []string{d.addr()})

	l := mustLock(t, a, "go:basic", redlockd.TTL(10*time.Second))
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(l.Owner()) || l.Fence() == 0 {
		t.Fatalf("owner %q fence %d", l.Owner(), l.Fence())
	}
	if v := l.Validity(); v <= 0 || v > 10*time.Second {
		t.Fatalf("validity %v", v)
	}
	if l.Done() != nil {
		t.Fatalf("a lock without KEEP has no Done channel")
	}
	_, err := b.Lock(bg(), "go:basic", redlockd.TTL(10*time.Second))
	var busy *redlockd.BusyError
	if !errors.Is(err, redlockd.ErrBusy) || !errors.As(err, &busy) || busy.RetryAfter <= 0 {
		t.Fatalf("second Lock: %v, want BUSY with a retry hint", err)
	}
	if v, err := l.Extend(bg(), 20*time.Second); err != nil || v <= 10*time.Second {
		t.Fatalf("Extend: %v %v", v, err)
	}
	if s, err := b.Status(bg(), "go:basic"); err != nil || !s.Held || s.Remaining <= 10*time.Second || s.Remaining > 20*time.Second {
		t.Fatalf("Status while held: %+v %v", s, err)
	}
	if err := l.Unlock(bg()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if s, err := b.Status(bg(), "go:basic"); err != nil || s != (redlockd.Status{}) {
		t.Fatalf("Status once released: %+v %v, want free", s, err)
	}
	if _, err := b.Status(bg(), "two words"); err == nil {
		t.Fatalf("Status of a resource with a space must be refused before it is sent")
	}
	if err := a.Unlock(bg(), "go:basic", l.Owner()); !errors.Is(err, redlockd.ErrNotHeld) {
		t.Fatalf("Unlock twice: %v, want ErrNotHeld", err)
	}
	l2 := mustLock(t, b, "go:basic", redlockd.TTL(10*time.Second))
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
	}
	l2.Unlock(bg())

	_, err = a.Lock(bg(), "go:basic", redlockd.TTL(2*time.Hour))
	var se *redlockd.ServerError
	if !errors.As(err, &se) || se.Code != "BAD_TTL" {
		t.Fatalf("TTL above max: %v, want ERR BAD_TTL", err)
	}
	if _, err := a.Lock(bg(), "two words", redlockd.TTL(time.Second)); err == nil {
		t.Fatalf("a resource with a space must be refused before it is sent")
	}
	if err := a.Ping(bg()); err != nil {
		t.Fatalf("Ping after errors: %v", err)
	}
	if hello, err := a.Hello(bg()); err != nil || !regexp.MustCompile(`^redlockd \S+ proto=1(\.1)? nodes=5 quorum=3$`).MatchString(hello) {
		t.Fatalf("Hello: %q %v", hello, err)
	}
}

func TestPipelinedGoroutinesShareOneConnection(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d.addr()})
	before := d.number("clients")
	var wg sync.WaitGroup
	var mu sync.Mutex
	fences := map[uint64]bool{}
	errs := make(chan error, 32)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				l, err := c.Lock(bg(), "go:pipe:"+string(rune('a'+g))+":"+string(rune('0'+i%3)), redlockd.TTL(10*time.Second))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fences[l.Fence()] = true
				mu.Unlock()
				if err := l.Unlock(bg()); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	if len(fences) != 16*20 {
		t.Fatalf("%d distinct fences, want %d", len(fences), 16*20)
	}
	if after := d.number("clients"); after > before {
		t.Fatalf("clients %v -> %v: the client opened more connections", before, after)
	}
}

func TestWaitAndCancelledWait(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	holder, waiter, third := dial(t, []string{d.addr()}), dial(t, []string{d.addr()}), dial(t, []string{d.addr()})

	// A wait that gets the lock when the holder unlocks.
	l := mustLock(t, holder, "go:wait", redlockd.TTL(30*time.Second))
	got := make(chan error, 1)
	var won *redlockd.Lease
	go func() {
		var err error
		won, err = waiter.Lock(bg(), "go:wait", redlockd.TTL(10*time.Second), redlockd.Wait(30*time.Second))
		got <- err
	}()
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 1 }) {
		t.Fatalf("the waiter was never queued")
	}
	l.Unlock(bg())
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock: %v", err)
	}
	won.Unlock(bg())

	// A wait that runs out is BUSY.
	l = mustLock(t, holder, "go:wait", redlockd.TTL(30*time.Second))
	if _, err := waiter.Lock(bg(), "go:wait", redlockd.TTL(time.Second), redlockd.Wait(200*time.Millisecond)); !errors.Is(err, redlockd.ErrBusy) {
		t.Fatalf("Wait that runs out: %v, want ErrBusy", err)
	}

	// A wait cancelled by its context: the reply still comes (after the holder unlocks) and
	// grants the lock to nobody; the client must release it, or the third client would be
	// stuck for the waiter's 60 s TTL.
	ctx, cancel := context.WithCancel(bg())
	go func() {
		_, err := waiter.Lock(ctx, "go:wait", redlockd.TTL(60*time.Second), redlockd.Wait(30*time.Second))
		got <- err
	}()
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 1 }) {
		t.Fatalf("the second waiter was never queued")
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", err)
	}
	acquired := d.number("counters.acquired")
	l.Unlock(bg()) // the daemon now grants the lock to the abandoned WAIT
	if !eventually(10*time.Second, func() bool {
		l3, err := third.Lock(bg(), "go:wait", redlockd.TTL(time.Second))
		if err != nil {
			return false
		}
		l3.Unlock(bg())
		return true
	}) {
		t.Fatalf("the lock granted to the cancelled waiter was not released")
	}
	if got := d.number("counters.acquired"); got < acquired+2 {
		t.Fatalf("acquired went %v -> %v: the abandoned WAIT was never granted, the test proved nothing", acquired, got)
	}
	// The pipelined connection still works: the abandoned reply was consumed in its turn.
	if err := waiter.Ping(bg()); err != nil {
		t.Fatalf("Ping after a cancelled wait: %v", err)
	}

	// A context deadline caps the WAIT that is sent: the daemon stops waiting about when the
	// caller does, instead of keeping a waiter nobody waits for queued for 30 s.
	l = mustLock(t, holder, "go:wait", redlockd.TTL(30*time.Second))
	ctx2, cancel2 := context.WithTimeout(bg(), 300*time.Millisecond)
	defer cancel2()
	_, err := waiter.Lock(ctx2, "go:wait", redlockd.TTL(time.Second), redlockd.Wait(30*time.Second))
	if !errors.Is(err, redlockd.ErrBusy) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a 300 ms context: %v", err)
	}
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 0 }) {
		t.Fatalf("the daemon still holds the waiter: the WAIT was not capped by the context deadline")
	}
	l.Unlock(bg())
}

func TestKeepRenewedPastItsTTL(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	c, other := dial(t, []string{d.addr()}), dial(t, []string{d.addr()})
	ttl := time.Second
	start := time.Now()
	l := mustLock(t, c, "go:keep", redlockd.TTL(ttl), redlockd.Keep())
	renewed := d.number("counters.renewed")
	if !eventually(30*time.Second, func() bool {
		return time.Since(start) > 3*ttl && d.number("counters.renewed") >= renewed+4
	}) {
		t.Fatalf("not renewed")
	}
	if _, err := other.Lock(bg(), "go:keep", redlockd.TTL(time.Second)); !errors.Is(err, redlockd.ErrBusy) {
		t.Fatalf("Lock of a kept lock: %v, want ErrBusy", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("lost: %v", l.Err())
	default:
	}
	if err := l.Unlock(bg()); err != nil {
		t.Fatalf("Unlock of the kept lock: %v", err)
	}
}

func TestLostWhenThreeMastersDie(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d.addr()})
	l := mustLock(t, c, "go:lost", redlockd.TTL(time.Second), redlockd.Keep())
	// A WAIT pending on the same connection: the LOST push arrives before its reply and must
	// not be taken for it.
	other := dial(t, []string{d.addr()})
	mustLock(t, other, "go:lost-held", redlockd.TTL(30*time.Second))
	waited := make(chan error, 1)
	go func() {
		_, err := c.Lock(bg(), "go:lost-held", redlockd.TTL(time.Second), redlockd.Wait(3*time.Second))
		waited <- err
	}()
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 1 }) {
		t.Fatalf("the waiter was never queued")
	}
	for i := 0; i < 3; i++ {
		f.nodes[i].kill()
	}
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("no LOST within 20 s of killing three masters")
	}
	if err := <-waited; !errors.Is(err, redlockd.ErrBusy) && !errors.Is(err, redlockd.ErrNoQuorum) {
		t.Fatalf("the WAIT pending when LOST came: %v, want BUSY or NOQUORUM", err)
	}
	if !errors.Is(l.Err(), redlockd.ErrLost) || !strings.Contains(l.Err().Error(), "LOST") {
		t.Fatalf("Err: %v", l.Err())
	}
	if err := l.Unlock(bg()); err != nil {
		t.Fatalf("Unlock of a lost lease: %v, want nil (already reported)", err)
	}
	_, err := c.Lock(bg(), "go:lost2", redlockd.TTL(time.Second))
	var nq *redlockd.NoQuorumError
	if !errors.As(err, &nq) || nq.Needed != 3 {
		t.Fatalf("Lock with two masters: %v, want NOQUORUM", err)
	}
	if _, err := c.Status(bg(), "go:lost2"); !errors.Is(err, redlockd.ErrNoQuorum) {
		t.Fatalf("Status with two masters: %v, want NOQUORUM", err)
	}
}

func TestFailover(t *testing.T) {
	f := startFleet(t, 5)
	d1 := startDaemon(t, f.addrs(), daemonOpts{})
	d2 := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d1.addr(), d2.addr()})
	kept := mustLock(t, c, "go:fo-keep", redlockd.TTL(30*time.Second), redlockd.Keep())
	plain := mustLock(t, c, "go:fo-plain", redlockd.TTL(30*time.Second))
	if c.Addr() != d1.addr() {
		t.Fatalf("connected to %s, want the first address", c.Addr())
	}
	d1.kill()
	select {
	case <-kept.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the KEEP lease was not reported lost when its daemon died")
	}
	if !errors.Is(kept.Err(), redlockd.ErrLost) {
		t.Fatalf("Err: %v", kept.Err())
	}
	l := mustLock(t, c, "go:fo-new", redlockd.TTL(10*time.Second))
	if c.Addr() != d2.addr() || l.Fence() <= plain.Fence() {
		t.Fatalf("after failover: addr %s fence %d", c.Addr(), l.Fence())
	}
	// A plain lease survives a failover: the second daemon releases it by its owner.
	if err := plain.Unlock(bg()); err != nil {
		t.Fatalf("Unlock of the plain lease through the second daemon: %v", err)
	}

	// Dial skips a dead first address; with none alive it says so.
	c2 := dial(t, []string{d1.addr(), d2.addr()})
	if c2.Addr() != d2.addr() {
		t.Fatalf("Dial connected to %q", c2.Addr())
	}
	d2.kill()
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	if _, err := redlockd.Dial(ctx, []string{d1.addr(), d2.addr()}); !errors.Is(err, redlockd.ErrUnavailable) {
		t.Fatalf("Dial with every daemon down: %v, want ErrUnavailable", err)
	}
}

func TestAuth(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{env: []string{"REDLOCKD_CLIENT_SECRET=c0rrect-h0rse"}, secret: "c0rrect-h0rse"})
	c := dial(t, []string{d.addr()}, redlockd.Secret("c0rrect-h0rse"))
	mustLock(t, c, "go:auth", redlockd.TTL(5*time.Second)).Unlock(bg())

	none := dial(t, []string{d.addr()})
	_, err := none.Lock(bg(), "go:auth", redlockd.TTL(5*time.Second))
	var se *redlockd.ServerError
	if !errors.Is(err, redlockd.ErrAuth) || !errors.As(err, &se) || se.Code != "NOAUTH" {
		t.Fatalf("without a secret: %v, want NOAUTH", err)
	}
	_, err = redlockd.Dial(bg(), []string{d.addr()}, redlockd.Secret("wrong"))
	if !errors.Is(err, redlockd.ErrAuth) || !errors.As(err, &se) || se.Code != "AUTH_FAILED" {
		t.Fatalf("wrong secret: %v, want AUTH_FAILED", err)
	}
}

func TestTLS(t *testing.T) {
	pki := makePKI(t)
	pem, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "client.crt"), filepath.Join(pki, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	// The daemon requires client certificates too (mutual TLS).
	conf := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}}
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{
		extra: map[string]any{"tls": map[string]any{"cert_file": filepath.Join(pki, "server.crt"),
			"key_file": filepath.Join(pki, "server.key"), "client_ca_file": filepath.Join(pki, "ca.crt")}},
		tlsConf: conf,
	})
	c := dial(t, []string{d.addr()}, redlockd.TLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}))
	l := mustLock(t, c, "go:tls", redlockd.TTL(5*time.Second), redlockd.Keep())
	if info, err := c.Info(bg()); err != nil || info["keep_locks"] != float64(1) {
		t.Fatalf("INFO over TLS: %v %v", info, err)
	}
	if err := l.Unlock(bg()); err != nil {
		t.Fatalf("Unlock over TLS: %v", err)
	}
	// A certificate from an unknown CA is refused; so are a client without a certificate and a
	// plaintext client.
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	if _, err := redlockd.Dial(ctx, []string{d.addr()}, redlockd.TLS(&tls.Config{RootCAs: pool})); !errors.Is(err, redlockd.ErrUnavailable) {
		t.Fatalf("Dial without a client certificate: %v, want ErrUnavailable", err)
	}
	if _, err := redlockd.Dial(ctx, []string{d.addr()}, redlockd.DialTimeout(2*time.Second)); !errors.Is(err, redlockd.ErrUnavailable) {
		t.Fatalf("plaintext Dial: %v, want ErrUnavailable", err)
	}
	if _, err := redlockd.Dial(ctx, []string{d.addr()}, redlockd.TLS(&tls.Config{})); !errors.Is(err, redlockd.ErrUnavailable) ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Dial with the system CAs: %v, want a certificate error", err)
	}
}

func TestHungDaemonIsAConnectionFailure(t *testing.T) {
	f := startFleet(t, 5)
	d1 := startDaemon(t, f.addrs(), daemonOpts{})
	d2 := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d1.addr(), d2.addr()}, redlockd.RequestTimeout(2*time.Second))

	// A reply that comes after a long WAIT's is not late: only the head of the queue is timed.
	holder := dial(t, []string{d1.addr()})
	l := mustLock(t, holder, "go:hol", redlockd.TTL(30*time.Second))
	waited := make(chan error, 1)
	go func() {
		_, err := c.Lock(bg(), "go:hol", redlockd.TTL(time.Second), redlockd.Wait(4*time.Second))
		waited <- err
	}()
	if !eventually(10*time.Second, func() bool { return d1.number("waiters") == 1 }) {
		t.Fatalf("the waiter was never queued")
	}
	if err := c.Ping(bg()); err != nil {
		t.Fatalf("Ping behind a 4 s WAIT with a 2 s request timeout: %v", err)
	}
	if err := <-waited; !errors.Is(err, redlockd.ErrBusy) {
		t.Fatalf("the WAIT: %v, want ErrBusy", err)
	}
	l.Unlock(bg())

	// A daemon that stops answering: the call fails, KEEP leases are lost, the next call fails over.
	kept := mustLock(t, c, "go:hung", redlockd.TTL(30*time.Second), redlockd.Keep())
	if err := d1.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d1.proc.Signal(syscall.SIGCONT) })
	if err := c.Ping(bg()); !errors.Is(err, redlockd.ErrConnectionLost) || !strings.Contains(err.Error(), "no reply") {
		t.Fatalf("Ping to a stopped daemon: %v, want ErrConnectionLost (no reply)", err)
	}
	select {
	case <-kept.Done():
	default:
		t.Fatalf("the KEEP lease of the hung connection is not lost")
	}
	if err := c.Ping(bg()); err != nil || c.Addr() != d2.addr() {
		t.Fatalf("after the hang: %v, connected to %q", err, c.Addr())
	}
}

func TestListAndStatusLabel(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d.addr()})
	l := mustLock(t, c, "go:list:a", redlockd.TTL(10*time.Second))
	lb := mustLock(t, c, "go:list:b", redlockd.TTL(10*time.Second), redlockd.Label("tester:1"))
	defer lb.Unlock(bg())
	for _, bad := range []string{"two words", strings.Repeat("x", 65)} {
		if _, err := c.Lock(bg(), "go:list:c", redlockd.TTL(time.Second), redlockd.Label(bad)); err == nil {
			t.Fatalf("Label(%q) must be refused before it is sent", bad)
		}
	}
	listing, err := c.List(bg(), "go:list:", 0)
	if err != nil || len(listing.Locks) != 2 || listing.Truncated {
		t.Fatalf("List: %+v %v", listing, err)
	}
	a, b := listing.Locks[0], listing.Locks[1]
	if a.Resource != "go:list:a" || a.Kind != "exclusive" || len(a.Labels) != 0 ||
		b.Resource != "go:list:b" || len(b.Labels) != 1 || b.Labels[0] != "tester:1" ||
		b.Remaining <= 5*time.Second || b.Remaining > 10*time.Second {
		t.Fatalf("List: %+v", listing)
	}
	if strings.Contains(fmt.Sprintf("%+v", listing), l.Owner()) {
		t.Fatalf("LIST named an owner")
	}
	if s, err := c.Status(bg(), "go:list:b"); err != nil || s.Label != "tester:1" {
		t.Fatalf("Status of a labelled hold: %+v %v", s, err)
	}
	if first, err := c.List(bg(), "go:list:", 1); err != nil || len(first.Locks) != 1 || !first.Truncated {
		t.Fatalf("List COUNT 1: %+v %v", first, err)
	}
	if _, err := c.List(bg(), "two words", 0); err == nil {
		t.Fatalf("a prefix with a space must be refused before it is sent")
	}
	if err := l.Unlock(bg()); err != nil {
		t.Fatal(err)
	}
}

func TestMaxHoldEndsAKeepLock(t *testing.T) {
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d.addr()})
	l := mustLock(t, c, "go:maxhold", redlockd.TTL(time.Second), redlockd.Keep(), redlockd.MaxHold(500*time.Millisecond))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("no LOST after MAXHOLD")
	}
	if !errors.Is(l.Err(), redlockd.ErrLost) || !strings.Contains(l.Err().Error(), "LOST") {
		t.Fatalf("Err: %v", l.Err())
	}
	if err := l.Unlock(bg()); err != nil {
		t.Fatalf("Unlock of a lock reported lost: %v", err)
	}
	if _, err := c.Lock(bg(), "go:maxhold", redlockd.TTL(time.Second), redlockd.MaxHold(time.Second)); err == nil {
		t.Fatalf("MaxHold without Keep must be refused before it is sent")
	}
}
