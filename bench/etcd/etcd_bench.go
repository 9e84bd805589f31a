// etcd peer for scripts/bench: C workers cycle Lock + Unlock of clientv3/concurrency's Mutex over
// R resources, each worker on its own session (lease), all on one client.
//
//	etcd-bench --endpoints 127.0.0.1:2379,... [-c 50] [-r 10000] [-d 10] [--warmup 2] [--ttl 10000]
//	           [--wait 10000] [--server-pid PID,...]
//
// Prints one JSON line with the fields of bench/node/redlock-bench.mjs (cycles_per_s, acquire
// percentiles, client CPU per cycle) and, with --server-pid, the servers' CPU per cycle.
// Cycles count when their Unlock completes inside the window; acquire latencies count for Locks
// that start inside it. A Lock waits for the holder (etcd's mutex always queues), for at most
// --wait ms; one that times out counts as failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated client URLs")
	workers := flag.Int("c", 50, "workers (each with its own session)")
	resources := flag.Int("r", 10000, "resources")
	seconds := flag.Float64("d", 10, "measured seconds")
	warmup := flag.Float64("warmup", 2, "seconds before the window")
	ttl := flag.Int("ttl", 10000, "session (lease) TTL in ms, rounded up to whole seconds")
	wait := flag.Int("wait", 10000, "how long a Lock waits for the holder, ms")
	serverPids := flag.String("server-pid", "", "comma-separated pids whose CPU is reported")
	flag.Parse()

	client, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		fail("connect: %v", err)
	}
	defer client.Close()
	ttlSeconds := (*ttl + 999) / 1000
	sessions := make([]*concurrency.Session, *workers)
	for i := range sessions {
		if sessions[i], err = concurrency.NewSession(client, concurrency.WithTTL(ttlSeconds)); err != nil {
			fail("session: %v", err)
		}
	}

	var measuring, running atomic.Bool
	running.Store(true)
	var cycles, failed, errors atomic.Int64
	latencies := make([][]float64, *workers) // µs, per worker: no lock on the hot path
	var done sync.WaitGroup
	for w := 0; w < *workers; w++ {
		done.Add(1)
		go func(w int) {
			defer done.Done()
			random := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
			for running.Load() {
				mutex := concurrency.NewMutex(sessions[w], "/lock/r"+strconv.Itoa(random.Intn(*resources)))
				counted := measuring.Load()
				started := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*wait)*time.Millisecond)
				err := mutex.Lock(ctx)
				cancel()
				if err != nil {
					if measuring.Load() {
						if err == context.DeadlineExceeded {
							failed.Add(1)
						} else {
							errors.Add(1)
						}
					}
					continue
				}
				if counted && measuring.Load() {
					latencies[w] = append(latencies[w], float64(time.Since(started).Microseconds()))
				}
				if err := mutex.Unlock(context.Background()); err != nil {
					if measuring.Load() {
						errors.Add(1)
					}
				} else if measuring.Load() {
					cycles.Add(1)
				}
			}
		}(w)
	}

	time.Sleep(time.Duration(*warmup * float64(time.Second)))
	pids := parsePids(*serverPids)
	client0, servers0 := selfCPU(), serversCPU(pids)
	started := time.Now()
	measuring.Store(true)
	time.Sleep(time.Duration(*seconds * float64(time.Second)))
	measuring.Store(false)
	window := time.Since(started).Seconds()
	clientUs, serverUs := selfCPU()-client0, serversCPU(pids)-servers0
	running.Store(false)
	done.Wait()
	for _, s := range sessions {
		s.Close()
	}

	var all []float64
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Float64s(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)))
		if i >= len(all) {
			i = len(all) - 1
		}
		return all[i]
	}
	n := float64(cycles.Load())
	perCycle := func(us float64) float64 {
		if n == 0 {
			return 0
		}
		return us / n
	}
	out, _ := json.Marshal(map[string]any{
		"tool": "etcd-clientv3-mutex", "c": *workers, "r": *resources, "ttl": *ttl, "seconds": window,
		"cycles": cycles.Load(), "cycles_per_s": n / window, "failed_acquires": failed.Load(),
		"errors": errors.Load(), "acquires": len(all), "acquire_p50_us": pct(0.5),
		"acquire_p99_us": pct(0.99), "acquire_p999_us": pct(0.999),
		"client_cpu_us_per_cycle": perCycle(clientUs), "server_cpu_us_per_cycle": perCycle(serverUs),
		"server_cpu_pct": serverUs / (window * 1e4),
	})
	fmt.Println(string(out))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "etcd-bench: "+format+"\n", args...)
	os.Exit(1)
}

func parsePids(list string) []int {
	var pids []int
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		pid, err := strconv.Atoi(item)
		if err != nil {
			fail("bad --server-pid %q", item)
		}
		pids = append(pids, pid)
	}
	return pids
}

// This process's user + system CPU in µs.
func selfCPU() float64 {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e3
}

// The summed utime + stime of pids in µs, from /proc/PID/stat.
func serversCPU(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		text, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			fail("read /proc/%d/stat: %v", pid, err)
		}
		// After "(comm)": field 3 is the state; utime and stime are fields 14 and 15.
		fields := strings.Fields(string(text[strings.LastIndexByte(string(text), ')')+1:]))
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		total += (utime + stime) * 1e6 / 100 // USER_HZ is 100 on Linux
	}
	return total
}
