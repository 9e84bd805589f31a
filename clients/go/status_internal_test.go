package redlockd

import (
	"errors"
	"testing"
	"time"
)

// STATUS's fields come in any order; unknown ones are ignored, malformed ones refused.
func TestParseStatusFields(t *testing.T) {
	good := map[string]Status{
		"OK FREE":                 {},
		"OK HELD 1500":            {Held: true, Remaining: 1500 * time.Millisecond},
		"OK HELD 29850 readers=1": {Held: true, Remaining: 29850 * time.Millisecond, Readers: 1},
		"OK FREE permits=1/3":     {PermitsUsed: 1, Permits: 3},
		"OK HELD 10 permits=2/2 readers=3 label=a=b": {Held: true, Remaining: 10 * time.Millisecond, Label: "a=b", Readers: 3, PermitsUsed: 2, Permits: 2},
		"OK HELD 10 future=1":                        {Held: true, Remaining: 10 * time.Millisecond},
	}
	for reply, want := range good {
		if got, err := parseStatus(reply); err != nil || got != want {
			t.Errorf("parseStatus(%q) = %+v, %v; want %+v", reply, got, err, want)
		}
	}
	for _, reply := range []string{"OK HELD", "OK HELD x", "OK FREE readers", "OK HELD 1 readers=x", "OK HELD 1 permits=2", "OK"} {
		if s, err := parseStatus(reply); err == nil {
			t.Errorf("parseStatus(%q) = %+v, want an error", reply, s)
		}
	}
	if _, err := parseStatus("NOQUORUM 2 3"); !errors.Is(err, ErrNoQuorum) {
		t.Errorf("NOQUORUM: %v", err)
	}
	if err := replyError("ERR PERMITS_MISMATCH 2 permits are in force"); !errors.Is(err, ErrPermitsMismatch) {
		t.Errorf("PERMITS_MISMATCH: %v", err)
	}
}
