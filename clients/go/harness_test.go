package redlockd_test

// Starts real redis-server masters and the real redlockd on free loopback ports. REDLOCKD_BIN
// names the daemon (default <repo>/build/redlockd), REDIS_SERVER redis-server (default: PATH).
// A missing binary fails the test and says what is missing.

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func redlockdBin(t *testing.T) string {
	t.Helper()
	path := os.Getenv("REDLOCKD_BIN")
	if path == "" {
		wd, _ := os.Getwd()
		path = filepath.Join(wd, "..", "..", "build", "redlockd")
	}
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("redlockd binary not found at %s: build it (cmake --build build --target redlockd) or set REDLOCKD_BIN", path)
	}
	return path
}

func redisBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found: install redis-server or set REDIS_SERVER")
	}
	return p
}

// freePort is a port the kernel just handed out on 127.0.0.1 (redis --port 0 is not discoverable).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls f until it is true or timeout passes.
func eventually(timeout time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

type redis struct {
	port   int
	proc   *os.Process
	exited chan struct{}
}

func (r *redis) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *redis) kill() {
	r.proc.Kill()
	<-r.exited
}

func (r *redis) pings() bool {
	c, err := net.DialTimeout("tcp", r.addr(), 500*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	c.Write([]byte("PING\r\n"))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "+PONG")
}

type fleet struct{ nodes []*redis }

func startFleet(t *testing.T, n int) *fleet {
	t.Helper()
	bin := redisBin(t)
	f := &fleet{}
	t.Cleanup(func() {
		for _, r := range f.nodes {
			r.kill()
		}
	})
	for i := 0; i < n; i++ {
		dir := t.TempDir()
		logPath := filepath.Join(dir, "redis.log")
		var r *redis
		for attempt := 0; attempt < 5 && r == nil; attempt++ {
			cand := &redis{port: freePort(t), exited: make(chan struct{})}
			log, _ := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			cmd := exec.Command(bin, "--port", fmt.Sprint(cand.port), "--bind", "127.0.0.1", "--save", "",
				"--appendonly", "no", "--protected-mode", "no", "--dir", dir)
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Start(); err != nil {
				t.Fatalf("redis-server: %v", err)
			}
			cand.proc = cmd.Process
			go func() { cmd.Wait(); log.Close(); close(cand.exited) }()
			exited := func() bool {
				select {
				case <-cand.exited:
					return true
				default:
					return false
				}
			}
			if eventually(10*time.Second, func() bool { return exited() || cand.pings() }) && !exited() {
				r = cand
			} else {
				cand.kill()
			}
		}
		if r == nil {
			t.Fatalf("redis-server did not start:\n%s", tail(logPath))
		}
		f.nodes = append(f.nodes, r)
	}
	return f
}

func (f *fleet) addrs() []string {
	var out []string
	for _, r := range f.nodes {
		out = append(out, r.addr())
	}
	return out
}

type daemon struct {
	t       *testing.T
	port    int
	proc    *os.Process
	exited  chan struct{}
	log     string
	secret  string
	tlsConf *tls.Config
	nodes   int
}

type daemonOpts struct {
	extra   map[string]any
	env     []string
	secret  string
	tlsConf *tls.Config
}

func startDaemon(t *testing.T, nodes []string, o daemonOpts) *daemon {
	t.Helper()
	bin := redlockdBin(t)
	dir := t.TempDir()
	d := &daemon{t: t, log: filepath.Join(dir, "redlockd.log"), secret: o.secret, tlsConf: o.tlsConf, nodes: len(nodes)}
	for attempt := 0; attempt < 5; attempt++ {
		d.port = freePort(t)
		cfg := map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", d.port), "nodes": nodes, "node_timeout_ms": 250}
		for k, v := range o.extra {
			cfg[k] = v
		}
		b, _ := json.Marshal(cfg)
		os.WriteFile(filepath.Join(dir, "redlockd.json"), b, 0o600)
		log, _ := os.OpenFile(d.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		cmd := exec.Command(bin, "--config", filepath.Join(dir, "redlockd.json"))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(), o.env...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redlockd: %v", err)
		}
		d.proc = cmd.Process
		d.exited = make(chan struct{})
		exited := d.exited
		go func() { cmd.Wait(); log.Close(); close(exited) }()
		ready := eventually(15*time.Second, func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			return d.ready()
		})
		select {
		case <-exited:
			ready = false
		default:
		}
		if ready {
			t.Cleanup(func() {
				d.kill()
				if t.Failed() {
					t.Logf("redlockd log (port %d):\n%s", d.port, tail(d.log))
				}
			})
			return d
		}
		d.kill()
	}
	t.Fatalf("redlockd did not become ready; log:\n%s", tail(d.log))
	return nil
}

func (d *daemon) addr() string { return fmt.Sprintf("127.0.0.1:%d", d.port) }

func (d *daemon) kill() {
	d.proc.Kill()
	<-d.exited
}

// info asks INFO on a connection of its own (not through the client under test).
func (d *daemon) info() (map[string]any, error) {
	var c net.Conn
	var err error
	c, err = net.DialTimeout("tcp", d.addr(), 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if d.tlsConf != nil {
		c = tls.Client(c, d.tlsConf)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	req := "INFO\n"
	n := 1
	if d.secret != "" {
		req = "AUTH " + d.secret + "\n" + req
		n = 2
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	var line string
	for i := 0; i < n; i++ {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(line, "OK ") {
		return nil, fmt.Errorf("INFO: %q", line)
	}
	var doc map[string]any
	return doc, json.Unmarshal([]byte(line[3:]), &doc)
}

func (d *daemon) ready() bool {
	doc, err := d.info()
	if err != nil {
		return false
	}
	nodes, _ := doc["nodes"].([]any)
	ok := 0
	for _, n := range nodes {
		if m, _ := n.(map[string]any); m != nil && m["state"] == "ok" {
			ok++
		}
	}
	return ok == d.nodes
}

// number reads a numeric INFO field, "counters.renewed" style; -1 if unreadable.
func (d *daemon) number(path string) float64 {
	doc, err := d.info()
	if err != nil {
		return -1
	}
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return f
}

// makePKI writes a throwaway CA, a server certificate for 127.0.0.1 and a client certificate
// with the openssl CLI.
func makePKI(t *testing.T) (dir string) {
	t.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatalf("the openssl CLI is needed for the TLS test: install openssl")
	}
	dir = t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command(openssl, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	run("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", "ca.key", "-subj", "/CN=redlockd go test ca", "-days", "2", "-out", "ca.crt")
	os.WriteFile(filepath.Join(dir, "ext.cnf"),
		[]byte("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"), 0o600)
	for _, name := range []string{"server", "client"} {
		run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
			"-keyout", name+".key", "-subj", "/CN="+name, "-out", name+".csr")
		run("x509", "-req", "-in", name+".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
			"-days", "2", "-extfile", "ext.cnf", "-out", name+".crt")
	}
	return dir
}
