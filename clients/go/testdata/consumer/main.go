// A user's program in a module of its own that requires the client by its module path
// (scripts/test-clients go-package writes the go.mod, with a replace pointing at the checkout):
// builds against it as `go get` would, and runs against the daemon at $REDLOCKD_ADDR.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := os.Getenv("REDLOCKD_ADDR")
	if addr == "" {
		log.Fatal("REDLOCKD_ADDR is not set")
	}
	c, err := redlockd.Dial(ctx, []string{addr})
	if err != nil {
		log.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	lease, err := c.Lock(ctx, "package:go", redlockd.TTL(10*time.Second))
	if err != nil {
		log.Fatalf("Lock: %v", err)
	}
	if _, err := c.Lock(ctx, "package:go", redlockd.TTL(time.Second)); !errors.Is(err, redlockd.ErrBusy) {
		log.Fatalf("a second Lock: %v, want ErrBusy", err)
	}
	if s, err := c.Status(ctx, "package:go"); err != nil || !s.Held {
		log.Fatalf("Status while held: %+v %v", s, err)
	}
	if err := lease.Unlock(ctx); err != nil {
		log.Fatalf("Unlock: %v", err)
	}
	if s, err := c.Status(ctx, "package:go"); err != nil || s.Held {
		log.Fatalf("Status once released: %+v %v", s, err)
	}
	fmt.Printf("github.com/redlockd/redlockd/clients/go from its module path: lock %d, status\n", lease.Fence())
}
