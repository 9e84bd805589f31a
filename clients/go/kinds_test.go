package redlockd_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

// The lock family of protocol 1.1 (SHARED, PERMITS, MLOCK) against real redis-server masters and
// the real redlockd binary. A daemon that does not say proto=1.1 fails these tests, saying so.

func startKindsDaemon(t *testing.T) (*fleet, *daemon) {
	t.Helper()
	f := startFleet(t, 5)
	d := startDaemon(t, f.addrs(), daemonOpts{})
	c := dial(t, []string{d.addr()})
	if hello := helloOf(t, c); !strings.Contains(" "+hello+" ", " proto=1.1 ") {
		t.Fatalf("the daemon at %s does not serve the lock family (HELLO: %q, protocol 1.1 needed): "+
			"build redlockd from a tree where SHARED, PERMITS and MLOCK are served", d.addr(), hello)
	}
	return f, d
}

func helloOf(t *testing.T, c *redlockd.Client) string {
	t.Helper()
	hello, err := c.Hello(bg())
	if err != nil {
		t.Fatalf("HELLO: %v", err)
	}
	return hello
}

func isBusy(err error) bool { return errors.Is(err, redlockd.ErrBusy) }

func TestSharedHoldsShareAndExcludeWriters(t *testing.T) {
	_, d := startKindsDaemon(t)
	a, b, w := dial(t, []string{d.addr()}), dial(t, []string{d.addr()}), dial(t, []string{d.addr()})
	first := mustLock(t, a, "go:rw", redlockd.TTL(10*time.Second), redlockd.Shared())
	second := mustLock(t, b, "go:rw", redlockd.TTL(10*time.Second), redlockd.Shared(), redlockd.Label("reader:2"))
	for _, l := range []*redlockd.Lease{first, second} {
		if l.Kind() != redlockd.KindShared || !regexp.MustCompile(`^00001000[0-9a-f]{32}$`).MatchString(l.Owner()) {
			t.Fatalf("shared lease: kind %s owner %s", l.Kind(), l.Owner())
		}
	}
	if second.Fence() <= first.Fence() {
		t.Fatalf("fence %d after %d", second.Fence(), first.Fence())
	}
	if _, err := w.Lock(bg(), "go:rw", redlockd.TTL(10*time.Second)); !isBusy(err) {
		t.Fatalf("an exclusive lock while readers hold it: %v, want BUSY", err)
	}
	if s, err := w.Status(bg(), "go:rw"); err != nil || !s.Held || s.Readers != 2 {
		t.Fatalf("Status: %+v %v, want held with 2 readers", s, err)
	}
	if v, err := first.Extend(bg(), 20*time.Second); err != nil || v <= 10*time.Second {
		t.Fatalf("Extend of a shared hold: %v %v", v, err)
	}
	for _, l := range []*redlockd.Lease{first, second} {
		if err := l.Unlock(bg()); err != nil {
			t.Fatalf("Unlock of a shared hold: %v", err)
		}
	}
	l := mustLock(t, w, "go:rw", redlockd.TTL(10*time.Second))
	defer l.Unlock(bg())
	if _, err := a.Lock(bg(), "go:rw", redlockd.TTL(time.Second), redlockd.Shared()); !isBusy(err) {
		t.Fatalf("a shared hold under an exclusive lock: %v, want BUSY", err)
	}
	if _, err := a.Lock(bg(), "go:rw", redlockd.TTL(time.Second), redlockd.Shared(), redlockd.Permits(2)); err == nil {
		t.Fatalf("Shared and Permits together must be refused before they are sent")
	}
}

func TestWaitingWriterIsNotStarved(t *testing.T) {
	_, d := startKindsDaemon(t)
	reader, writer, late := dial(t, []string{d.addr()}), dial(t, []string{d.addr()}), dial(t, []string{d.addr()})
	held := mustLock(t, reader, "go:rw-intent", redlockd.TTL(30*time.Second), redlockd.Shared())
	got := make(chan error, 1)
	go func() {
		l, err := writer.Lock(bg(), "go:rw-intent", redlockd.TTL(10*time.Second), redlockd.Wait(30*time.Second))
		if err == nil {
			err = l.Unlock(bg())
		}
		got <- err
	}()
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 1 }) {
		t.Fatalf("the writer was never queued")
	}
	if !eventually(10*time.Second, func() bool {
		l, err := late.Lock(bg(), "go:rw-intent", redlockd.TTL(time.Second), redlockd.Shared())
		if err == nil {
			l.Unlock(bg())
		}
		return isBusy(err)
	}) {
		t.Fatalf("a reader got in ahead of a waiting writer")
	}
	if err := held.Unlock(bg()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the writer: %v", err)
	}
}

func TestPermits(t *testing.T) {
	_, d := startKindsDaemon(t)
	a, b, c := dial(t, []string{d.addr()}), dial(t, []string{d.addr()}), dial(t, []string{d.addr()})
	first := mustLock(t, a, "go:pool", redlockd.TTL(10*time.Second), redlockd.Permits(2))
	second := mustLock(t, b, "go:pool", redlockd.TTL(10*time.Second), redlockd.Permits(2))
	for _, l := range []*redlockd.Lease{first, second} {
		if l.Kind() != redlockd.KindPermit || l.Permits() != 2 || !regexp.MustCompile(`^00002[0-9a-f]{35}$`).MatchString(l.Owner()) {
			t.Fatalf("permit: kind %s permits %d owner %s", l.Kind(), l.Permits(), l.Owner())
		}
	}
	if slots := map[int]bool{first.Slot(): true, second.Slot(): true}; !slots[0] || !slots[1] {
		t.Fatalf("slots %d and %d, want 0 and 1", first.Slot(), second.Slot())
	}
	if _, err := c.Lock(bg(), "go:pool", redlockd.TTL(10*time.Second), redlockd.Permits(2)); !isBusy(err) {
		t.Fatalf("a third permit of 2: %v, want BUSY", err)
	}
	if s, err := c.Status(bg(), "go:pool"); err != nil || s.Held || s.PermitsUsed != 2 || s.Permits != 2 {
		t.Fatalf("Status: %+v %v, want free with permits 2/2", s, err)
	}
	_, err := c.Lock(bg(), "go:pool", redlockd.TTL(10*time.Second), redlockd.Permits(3))
	var se *redlockd.ServerError
	if !errors.Is(err, redlockd.ErrPermitsMismatch) || !errors.As(err, &se) || se.Code != "PERMITS_MISMATCH" {
		t.Fatalf("another n: %v, want ERR PERMITS_MISMATCH", err)
	}
	// A permit waiter gets the released permit; the context ends an abandoned one.
	got := make(chan *redlockd.Lease, 1)
	go func() {
		l, err := c.Lock(bg(), "go:pool", redlockd.TTL(10*time.Second), redlockd.Permits(2), redlockd.Wait(30*time.Second))
		if err != nil {
			t.Errorf("the permit waiter: %v", err)
		}
		got <- l
	}()
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 1 }) {
		t.Fatalf("the permit waiter was never queued")
	}
	if err := first.Unlock(bg()); err != nil {
		t.Fatal(err)
	}
	third := <-got
	if third == nil || third.Slot() != first.Slot() {
		t.Fatalf("the waiter's permit: %+v", third)
	}
	third.Unlock(bg())
	second.Unlock(bg())
	if s, err := c.Status(bg(), "go:pool"); err != nil || s != (redlockd.Status{}) {
		t.Fatalf("Status once released: %+v %v", s, err)
	}
}

func TestLockManyAllOrNothing(t *testing.T) {
	_, d := startKindsDaemon(t)
	a, b := dial(t, []string{d.addr()}), dial(t, []string{d.addr()})
	set := []string{"go:acct:1", "go:acct:2"}
	l, err := a.LockMany(bg(), set, redlockd.TTL(10*time.Second), redlockd.Label("transfer"))
	if err != nil {
		t.Fatalf("LockMany: %v", err)
	}
	if l.Kind() != redlockd.KindSet || l.Resource() != "go:acct:1" || fmt.Sprint(l.Resources()) != fmt.Sprint(set) ||
		!regexp.MustCompile(`^00003000[0-9a-f]{32}$`).MatchString(l.Owner()) {
		t.Fatalf("set lease: %s %s %v %s", l.Kind(), l.Resource(), l.Resources(), l.Owner())
	}
	for _, r := range set {
		if _, err := b.Lock(bg(), r, redlockd.TTL(time.Second)); !isBusy(err) {
			t.Fatalf("Lock %s under the set: %v, want BUSY", r, err)
		}
		if s, err := b.Status(bg(), r); err != nil || s.Label != "transfer" {
			t.Fatalf("Status %s: %+v %v", r, s, err)
		}
	}
	if _, err := b.LockMany(bg(), []string{"go:acct:3", "go:acct:2"}, redlockd.TTL(time.Second)); !isBusy(err) {
		t.Fatalf("an overlapping set: %v, want BUSY", err)
	}
	if s, err := b.Status(bg(), "go:acct:3"); err != nil || s.Held {
		t.Fatalf("a refused set holds nothing: %+v %v", s, err)
	}
	if v, err := l.Extend(bg(), 20*time.Second); err != nil || v <= 10*time.Second {
		t.Fatalf("Extend of a set: %v %v", v, err)
	}
	if err := a.UnlockMany(bg(), []string{"go:acct:2"}, l.Owner()); err != nil {
		t.Fatalf("UnlockMany of one: %v", err)
	}
	if s, _ := b.Status(bg(), "go:acct:2"); s.Held {
		t.Fatalf("go:acct:2 still held after MUNLOCK of it")
	}
	if s, _ := b.Status(bg(), "go:acct:1"); !s.Held {
		t.Fatalf("go:acct:1 released by MUNLOCK of go:acct:2")
	}
	// UNLOCK with the set's owner releases that one resource; then nothing of it is left.
	if err := a.Unlock(bg(), "go:acct:1", l.Owner()); err != nil {
		t.Fatalf("Unlock of one resource of a set: %v", err)
	}
	if s, _ := b.Status(bg(), "go:acct:1"); s.Held {
		t.Fatalf("go:acct:1 still held after UNLOCK with the set's owner")
	}
	if err := l.Unlock(bg()); !errors.Is(err, redlockd.ErrNotHeld) {
		t.Fatalf("Unlock of a set released already: %v, want ErrNotHeld", err)
	}

	other, err := b.LockMany(bg(), []string{"go:acct:2", "go:acct:1"}, redlockd.TTL(10*time.Second), redlockd.Wait(5*time.Second))
	if err != nil || other.Fence() <= l.Fence() {
		t.Fatalf("LockMany in the other order: %v", err)
	}
	if v, err := a.ExtendMany(bg(), []string{"go:acct:1"}, other.Owner(), 15*time.Second); err != nil || v <= 10*time.Second {
		t.Fatalf("ExtendMany: %v %v", v, err)
	}
	if err := other.Unlock(bg()); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{nil, {"a", "a"}, {"two words"}} {
		if _, err := a.LockMany(bg(), bad, redlockd.TTL(time.Second)); err == nil {
			t.Fatalf("LockMany(%q) must be refused before it is sent", bad)
		}
	}
}

func TestCancelledLockManyReleasesItsLateGrant(t *testing.T) {
	_, d := startKindsDaemon(t)
	holder, waiter, third := dial(t, []string{d.addr()}), dial(t, []string{d.addr()}), dial(t, []string{d.addr()})
	held := mustLock(t, holder, "go:set-cancel:b", redlockd.TTL(30*time.Second))
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() {
		_, err := waiter.LockMany(ctx, []string{"go:set-cancel:a", "go:set-cancel:b"},
			redlockd.TTL(60*time.Second), redlockd.Wait(30*time.Second))
		done <- err
	}()
	if !eventually(10*time.Second, func() bool { return d.number("waiters") == 1 }) {
		t.Fatalf("the set was never queued")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled LockMany: %v", err)
	}
	acquired := d.number("counters.acquired")
	if err := held.Unlock(bg()); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool {
		l, err := third.LockMany(bg(), []string{"go:set-cancel:a", "go:set-cancel:b"}, redlockd.TTL(time.Second))
		if err == nil {
			l.Unlock(bg())
		}
		return err == nil
	}) {
		t.Fatalf("the set granted to the cancelled wait was not released (MUNLOCK)")
	}
	if d.number("counters.acquired") < acquired+2 {
		t.Fatalf("the cancelled wait was never granted: the test proved nothing")
	}
}

func TestKeepHoldsOfEveryKindAreLost(t *testing.T) {
	f, d := startKindsDaemon(t)
	c := dial(t, []string{d.addr()})
	set, err := c.LockMany(bg(), []string{"go:lost:a", "go:lost:b"}, redlockd.TTL(time.Second), redlockd.Keep())
	if err != nil {
		t.Fatal(err)
	}
	permit := mustLock(t, c, "go:lost:pool", redlockd.TTL(time.Second), redlockd.Keep(), redlockd.Permits(2))
	reader := mustLock(t, c, "go:lost:rw", redlockd.TTL(time.Second), redlockd.Keep(), redlockd.Shared())
	for i := 0; i < 3; i++ {
		f.nodes[i].kill()
	}
	for _, l := range []*redlockd.Lease{set, permit, reader} {
		select {
		case <-l.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("no LOST for the %s hold", l.Kind())
		}
		if !strings.Contains(l.Err().Error(), "LOST") {
			t.Fatalf("%s: %v", l.Kind(), l.Err())
		}
		if err := l.Unlock(bg()); err != nil {
			t.Fatalf("Unlock of a %s hold reported lost: %v", l.Kind(), err)
		}
	}
}
