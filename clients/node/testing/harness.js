// Starts real redis-server masters and the real redlockd on free loopback ports. REDLOCKD_BIN
// names the daemon (default <repo>/build/redlockd), REDIS_SERVER redis-server (default: PATH).
// A missing binary fails the test and says what is missing.

import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

function executable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function which(name) {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir && executable(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

export function redlockdBin() {
  const file = process.env.REDLOCKD_BIN || path.join(repo, "build", "redlockd");
  if (!executable(file)) {
    throw new Error(`redlockd binary not found at ${file}: build it (cmake --build build --target redlockd) or set REDLOCKD_BIN`);
  }
  return file;
}

function redisBin() {
  const file = process.env.REDIS_SERVER || which("redis-server");
  if (!file) throw new Error("redis-server not found: install redis-server or set REDIS_SERVER");
  return file;
}

/** A port the kernel just handed out on 127.0.0.1 (redis --port 0 is not discoverable). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls predicate (sync or async) until it is true or timeout ms passed; its last value. */
export async function eventually(predicate, timeout = 10000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (await predicate()) return true;
    } catch {
      // not yet
    }
    if (Date.now() >= deadline) return false;
    await pause(10);
  }
}

function tail(file) {
  try {
    return fs.readFileSync(file, "utf8").slice(-8000);
  } catch {
    return "";
  }
}

function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

class Proc {
  constructor(bin, args, log, env) {
    const fd = fs.openSync(log, "a");
    this.child = spawn(bin, args, { stdio: ["ignore", fd, fd], env: env ?? process.env });
    fs.closeSync(fd);
    this.exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.running = true;
    this.exited.then(() => {
      this.running = false;
    });
  }
  async kill() {
    if (this.running) this.child.kill("SIGKILL");
    await this.exited;
  }
}

/** One line request/reply exchange on a connection of its own (not the client under test). */
function exchange(port, lines, tlsOptions, want) {
  return new Promise((resolve, reject) => {
    const socket = tlsOptions
      ? tls.connect({ host: "127.0.0.1", port, ...tlsOptions })
      : net.connect({ host: "127.0.0.1", port });
    let data = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("timeout"));
    }, 2000);
    socket.setEncoding("utf8");
    socket.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on("data", (chunk) => {
      data += chunk;
      const got = data.split("\n");
      if (got.length > want) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got.slice(0, want));
      }
    });
    socket.write(lines.map((l) => l + "\n").join(""));
  });
}

export class Fleet {
  static async start(count = 5) {
    const fleet = new Fleet();
    fleet.dir = tempDir("redlockd-node-fleet-");
    fleet.nodes = [];
    try {
      for (let i = 0; i < count; i++) fleet.nodes.push(await startRedis(path.join(fleet.dir, `node${i}`)));
    } catch (error) {
      await fleet.close();
      throw error;
    }
    return fleet;
  }
  get addresses() {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`);
  }
  async kill(i) {
    await this.nodes[i].proc.kill();
  }
  async close() {
    for (const n of this.nodes) await n.proc.kill();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

async function startRedis(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const log = path.join(dir, "redis.log");
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const proc = new Proc(redisBin(), ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", dir], log);
    const up = await eventually(async () => !proc.running || (await exchange(port, ["PING"], null, 1))[0].startsWith("+PONG"));
    if (up && proc.running) return { port, proc };
    await proc.kill();
  }
  throw new Error(`redis-server did not start:\n${tail(log)}`);
}

export class Daemon {
  /** options: extra (merged into the JSON config), env, secret, tls (connect options for INFO). */
  static async start(nodes, options = {}) {
    const d = new Daemon();
    d.dir = tempDir("redlockd-node-daemon-");
    d.log = path.join(d.dir, "redlockd.log");
    d.nodes = nodes;
    d.secret = options.secret;
    d.tls = options.tls;
    const bin = redlockdBin();
    for (let attempt = 0; attempt < 5; attempt++) {
      d.port = await freePort();
      const config = { listen: `127.0.0.1:${d.port}`, nodes, node_timeout_ms: 250, ...(options.extra ?? {}) };
      fs.writeFileSync(path.join(d.dir, "redlockd.json"), JSON.stringify(config, null, 2));
      d.proc = new Proc(bin, ["--config", path.join(d.dir, "redlockd.json")], d.log, { ...process.env, ...(options.env ?? {}) });
      const ready = await eventually(async () => !d.proc.running || (await d.ready()), 15000);
      if (ready && d.proc.running) return d;
      await d.proc.kill();
    }
    throw new Error(`redlockd did not become ready; log:\n${tail(d.log)}`);
  }
  get address() {
    return `127.0.0.1:${this.port}`;
  }
  async info() {
    const lines = [...(this.secret ? [`AUTH ${this.secret}`] : []), "INFO"];
    const replies = await exchange(this.port, lines, this.tls, lines.length);
    const last = replies[replies.length - 1];
    if (!last.startsWith("OK ")) throw new Error(`INFO: ${last}`);
    return JSON.parse(last.slice(3));
  }
  async ready() {
    const info = await this.info();
    return info.nodes.filter((n) => n.state === "ok").length === this.nodes.length;
  }
  async kill() {
    await this.proc.kill();
  }
  async close(failed) {
    await this.proc.kill();
    if (failed) console.error(`----- redlockd log (port ${this.port}) -----\n${tail(this.log)}`);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A throwaway CA, a server certificate for 127.0.0.1 and a client certificate (openssl CLI). */
export function makePki() {
  const openssl = which("openssl");
  if (!openssl) throw new Error("the openssl CLI is needed for the TLS test: install openssl");
  const dir = tempDir("redlockd-node-pki-");
  const run = (...args) => execFileSync(openssl, args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  run("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-subj", "/CN=redlockd node test ca", "-days", "2", "-out", "ca.crt");
  fs.writeFileSync(path.join(dir, "ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
  for (const name of ["server", "client"]) {
    run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${name}.key`, "-subj", `/CN=${name}`, "-out", `${name}.csr`);
    run("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", `${name}.crt`);
  }
  const file = (name) => path.join(dir, name);
  return { dir, ca: file("ca.crt"), cert: file("server.crt"), key: file("server.key"), clientCert: file("client.crt"), clientKey: file("client.key") };
}
