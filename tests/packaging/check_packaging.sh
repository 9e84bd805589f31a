#!/usr/bin/env bash
# Checks the systemd units, the Dockerfile and the docker-compose file without a running systemd
# or Docker engine:
#   tests/packaging/check_packaging.sh [BUILD_DIR | REDLOCKD_BINARY]
# BUILD_DIR: a CMake build directory; its redlockd is used, and the unit `cmake --install
# BUILD_DIR --prefix /usr` renders (installed into a scratch DESTDIR).
# REDLOCKD_BINARY: a built redlockd; the unit is rendered from config/redlockd.service.in.
# Without an argument the unit is rendered from the template with ExecStart pointed at true(1),
# and the --check-config checks are skipped.
# Needs (Debian 12): systemd (systemd-analyze), docker-compose, python3, python3-yaml; with a
# binary, redis-server too (the image's health check is run against a real daemon).
# Installs nothing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

binary=""
build=""
unit_source=""
if [ $# -gt 1 ]; then
  echo "usage: $0 [BUILD_DIR | REDLOCKD_BINARY]" >&2
  exit 2
elif [ $# -eq 1 ] && [ -d "$1" ]; then
  build=$(cd "$1" && pwd)
  [ -x "$build/redlockd" ] && binary=$build/redlockd
  if DESTDIR=$work/root cmake --install "$build" --prefix /usr >"$work/install.log" 2>&1; then
    unit_source=$work/root/usr/lib/systemd/system/redlockd.service
  else
    echo "check_packaging: cmake --install $build --prefix /usr failed:" >&2
    cat "$work/install.log" >&2
    exit 1
  fi
elif [ $# -eq 1 ] && [ -f "$1" ] && [ -x "$1" ]; then
  binary=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
elif [ $# -eq 1 ]; then
  echo "check_packaging: $1 is neither a build directory nor an executable" >&2
  exit 2
fi
if [ -z "$unit_source" ]; then
  # What configure_file does with the default --prefix /usr/local.
  sed -e 's|@CMAKE_INSTALL_FULL_BINDIR@|/usr/local/bin|g' \
    -e 's|@CMAKE_INSTALL_FULL_SYSCONFDIR@|/usr/local/etc|g' \
    -e 's|@CMAKE_INSTALL_FULL_DOCDIR@|/usr/local/share/doc/redlockd|g' \
    "$root/config/redlockd.service.in" >"$work/rendered.service"
  unit_source=$work/rendered.service
fi
echo "unit: $unit_source"
echo "redlockd: ${binary:-(none: --check-config checks skipped)}"

passed=0
failed=0
skipped=0
check() { # name, command...
  local name=$1
  shift
  if output=$("$@" 2>&1); then
    echo "ok   $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    printf '%s\n' "$output" | sed 's/^/     /'
    failed=$((failed + 1))
  fi
}
skip() { # name, reason
  echo "skip $1 ($2)"
  skipped=$((skipped + 1))
}
have() { # command, Debian package
  command -v "$1" >/dev/null || { echo "missing $1 (Debian package $2)"; return 1; }
}

# --- systemd -------------------------------------------------------------------------------

# systemd-analyze verify prints some problems and still exits 0: any line naming the unit fails.
verify_unit() { # unit file
  have systemd-analyze systemd || return 1
  local out status
  # --man=no: Documentation=man:... pages are not installed here; the .deb test
  # (check_deb.sh) verifies them on the installed package.
  out=$(systemd-analyze verify --man=no "$1" 2>&1)
  status=$?
  if [ $status -ne 0 ] || printf '%s\n' "$out" | grep -qF "$(basename "$1")"; then
    printf '%s\n' "$out"
    return 1
  fi
}

# A unit's setting (the last assignment wins, as in systemd); empty if unset.
setting() { # unit file, key
  sed -n "s/^$2=//p" "$1" | tail -n 1
}

# In microseconds: systemd's own parser, so "15s", "1min 30s" and "90" all work.
timespan_us() {
  systemd-analyze timespan "$1" 2>/dev/null | sed -n 's/^ *μs: *//p'
}

unit=$work/redlockd.service
# The installed unit, pointed at the built binary (or true) and the repository's default config.
exec_binary=${binary:-$(command -v true)}
sed -e "s|^ExecStart=.*|ExecStart=$exec_binary --config $root/config/redlockd.json|" \
  "$unit_source" >"$unit"

no_placeholders() { ! grep -n '@[A-Z_]*@' "$1"; }
check "redlockd.service has no unsubstituted @VARIABLES@" no_placeholders "$unit_source"
check "systemd-analyze verify redlockd.service is clean" verify_unit "$unit"

unit_settings() {
  local missing=() expected key want got
  expected=(
    "Type=notify" "NotifyAccess=main" "Restart=on-failure" "WatchdogSec=10s"
    "DynamicUser=yes" "ProtectSystem=strict" "ProtectHome=yes" "PrivateTmp=yes"
    "PrivateDevices=yes" "NoNewPrivileges=yes" "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX"
    "CapabilityBoundingSet=" "AmbientCapabilities=" "LimitNOFILE=65536"
    "MemoryDenyWriteExecute=yes" "LockPersonality=yes" "RestrictRealtime=yes"
    "RestrictNamespaces=yes" "SystemCallArchitectures=native" "ProtectKernelTunables=yes"
    "ProtectKernelModules=yes" "ProtectKernelLogs=yes" "ProtectControlGroups=yes"
    "ProtectClock=yes" "ProtectHostname=yes" "UMask=077"
  )
  for want in "${expected[@]}"; do
    key=${want%%=*}
    got=$(setting "$unit_source" "$key")
    grep -q "^$key=" "$unit_source" && [ "$key=$got" = "$want" ] ||
      missing+=("$want (found: $(grep "^$key=" "$unit_source" | tail -n 1))")
  done
  grep -q "^ExecStart=.*/redlockd --config .*/redlockd/redlockd.json$" "$unit_source" ||
    missing+=("ExecStart=.../redlockd --config .../redlockd/redlockd.json")
  [ ${#missing[@]} -eq 0 ] || { printf 'expected %s\n' "${missing[@]}"; return 1; }
}
check "redlockd.service: notify, watchdog, restart and hardening settings" unit_settings

stop_timeout_covers_shutdown() {
  have systemd-analyze systemd && have python3 python3 || return 1
  local stop_us shutdown_ms
  stop_us=$(timespan_us "$(setting "$unit" TimeoutStopSec)")
  shutdown_ms=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("shutdown_timeout_ms", 5000))' \
    "$root/config/redlockd.json") || return 1
  [ -n "$stop_us" ] && [ "$stop_us" -gt $((shutdown_ms * 1000)) ] ||
    { echo "TimeoutStopSec (${stop_us:-unset} us) <= shutdown_timeout_ms ($shutdown_ms ms)"; return 1; }
}
check "redlockd.service: TimeoutStopSec > the config's shutdown_timeout_ms" stop_timeout_covers_shutdown

# systemd-analyze security rates the sandbox from 0 (locked down) to 10; --threshold is in tenths.
security_exposure() {
  have systemd-analyze systemd || return 1
  local out
  out=$(systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1) ||
    { printf '%s\n' "$out" | grep -e '^✗' -e 'Overall'; return 1; }
  printf '%s\n' "$out" | grep 'Overall'
}
check "redlockd.service: systemd-analyze security exposure <= 2.0" security_exposure

master_unit=$work/redis-master@7001.service
if [ -x /usr/bin/redis-server ]; then
  cp "$root/config/redis-master@.service" "$master_unit"
else # verify needs the ExecStart binary; redis-server (package redis-server) is not installed
  sed -e "s|^ExecStart=/usr/bin/redis-server |ExecStart=$(command -v true) |" \
    "$root/config/redis-master@.service" >"$master_unit"
fi
check "systemd-analyze verify redis-master@7001.service is clean" verify_unit "$master_unit"

master_unit_delays_restart() {
  have systemd-analyze systemd || return 1
  local restart_us
  restart_us=$(timespan_us "$(setting "$master_unit" RestartSec)")
  [ -n "$restart_us" ] && [ "$restart_us" -ge 60000000 ] ||
    { echo "RestartSec (${restart_us:-unset} us) is shorter than 60 s"; return 1; }
  grep -q "max_ttl_ms" "$master_unit" || { echo "no note that max_ttl_ms bounds RestartSec"; return 1; }
}
check "redis-master@.service: delayed restart (RestartSec >= 60 s, tied to max_ttl_ms)" \
  master_unit_delays_restart

# Debian's redis-server package makes /etc/redis redis:redis 2770: the unit's dynamic user
# cannot read a config there, and the master would not start.
master_config_readable() {
  local config
  config=$(setting "$master_unit" ExecStart | awk '{print $2}')
  case "$config" in
    /etc/redis/*) echo "ExecStart reads $config, unreadable for DynamicUser=yes"; return 1 ;;
    /*.conf) ;;
    *) echo "ExecStart's second word is not a config file: $config"; return 1 ;;
  esac
  grep -q "^# .*install .*-m 0644 redis-master.conf $config" "$master_unit" ||
    { echo "the unit's comment does not tell how to install $config (mode 0644)"; return 1; }
}
check "redis-master@.service: config outside /etc/redis, installed readable for its DynamicUser" \
  master_config_readable

master_conf() {
  local conf=$root/config/redis-master.conf missing=() want
  for want in "maxmemory-policy noeviction" "appendonly yes" "appendfsync everysec" \
    "protected-mode no" "bind "; do
    grep -q "^$want" "$conf" || missing+=("$want")
  done
  grep -q -e "^replicaof" -e "^slaveof" "$conf" && missing+=("no replicaof")
  grep -q "^#.*appendfsync always" "$conf" || missing+=("a note on appendfsync always")
  [ ${#missing[@]} -eq 0 ] || { printf 'expected %s\n' "${missing[@]}"; return 1; }
}
check "redis-master.conf: noeviction, AOF everysec, notes on the trade-offs" master_conf

# --- docker ---------------------------------------------------------------------------------

compose_file=$root/docker/docker-compose.yml
resolved=$work/compose.yml
# A developer's docker/.env must not decide the outcome: an empty env file, and the secret (or
# not) in the environment.
: >"$work/empty.env"
test_secret=check-packaging-secret
compose() { docker-compose --env-file "$work/empty.env" -f "$compose_file" "$@"; }
compose_config() {
  have docker-compose docker-compose || return 1
  REDLOCKD_CLIENT_SECRET=$test_secret compose config >"$resolved"
}
check "docker-compose config parses docker/docker-compose.yml" compose_config

compose_needs_secret() {
  have docker-compose docker-compose || return 1
  local out
  if out=$(env -u REDLOCKD_CLIENT_SECRET docker-compose --env-file "$work/empty.env" \
    -f "$compose_file" config 2>&1); then
    echo "docker-compose config succeeded without REDLOCKD_CLIENT_SECRET"
    return 1
  fi
  grep -q 'REDLOCKD_CLIENT_SECRET' <<<"$out" || { echo "$out"; return 1; }
}
check "compose refuses to start redlockd without a client secret (REDLOCKD_CLIENT_SECRET)" \
  compose_needs_secret

services_match() {
  have docker-compose docker-compose || return 1
  local services
  services=$(REDLOCKD_CLIENT_SECRET=$test_secret compose config --services | sort | tr '\n' ' ')
  [ "$services" = "redis1 redis2 redis3 redis4 redis5 redlockd " ] ||
    { echo "services: $services"; return 1; }
}
check "compose runs exactly redis1..redis5 and redlockd" services_match

# The semantic checks read docker-compose's resolved output (anchors merged, paths absolute).
cat >"$work/checks.py" <<'PY'
import json, re, sys

def fail(message):
    sys.exit(message)

def load_compose(path):
    import yaml
    with open(path) as f:
        return yaml.safe_load(f)

def masters(compose):
    return sorted(name for name in compose["services"] if name != "redlockd")

def check_masters(resolved):
    compose = load_compose(resolved)
    names = masters(compose)
    if names != [f"redis{i}" for i in range(1, 6)]:
        fail(f"masters: {names}")
    volumes = set()
    for name in names:
        service = compose["services"][name]
        if not str(service.get("image", "")).startswith("redis:7"):
            fail(f"{name}: image {service.get('image')}, expected redis:7.x")
        command = service.get("command") or []
        command = " ".join(command) if isinstance(command, list) else command
        for setting in ("--maxmemory-policy noeviction", "--appendonly yes",
                        "--appendfsync everysec"):
            if setting not in command:
                fail(f"{name}: command lacks {setting}: {command}")
        if re.search(r"replicaof|slaveof", command):
            fail(f"{name}: masters must be independent: {command}")
        test = service.get("healthcheck", {}).get("test", [])
        test = " ".join(test) if isinstance(test, list) else test
        if "redis-cli" not in test or "ping" not in test:
            fail(f"{name}: healthcheck {test!r} is not redis-cli ping")
        data = [v for v in service.get("volumes", []) if str(v).split(":")[1:2] == ["/data"]]
        if len(data) != 1 or str(data[0]).split(":")[0] not in compose.get("volumes", {}):
            fail(f"{name}: expected one named volume on /data, got {service.get('volumes')}")
        volumes.add(str(data[0]).split(":")[0])
    if len(volumes) != len(names):
        fail(f"masters share volumes: {sorted(volumes)}")

def published(port):
    """(host_ip, published, target) of a resolved port: docker-compose 1.29 writes the short
    form "127.0.0.1:7400:7400/tcp", newer versions a mapping."""
    if isinstance(port, dict):
        return (port.get("host_ip", ""), str(port.get("published")), str(port.get("target")))
    match = re.fullmatch(r"(?:(.*):)?(\d+):(\d+)(?:/tcp)?", str(port))
    if not match:
        fail(f"cannot read the port {port!r}")
    return (match.group(1) or "", match.group(2), match.group(3))

def check_redlockd(resolved, repo, secret):
    compose = load_compose(resolved)
    service = compose["services"]["redlockd"]
    build = service.get("build", {})
    if build.get("context") != repo or build.get("dockerfile") != "docker/Dockerfile":
        fail(f"build: {build}, expected context {repo} and docker/Dockerfile")
    depends = service.get("depends_on", {})
    wanted = {name: {"condition": "service_healthy"} for name in masters(compose)}
    if depends != wanted:
        fail(f"depends_on: {depends}, expected every master with service_healthy")
    ports = sorted(published(p) for p in service.get("ports", []))
    if ports != [("127.0.0.1", "7400", "7400"), ("127.0.0.1", "7401", "7401")]:
        fail(f"ports: {service.get('ports')}, expected only 127.0.0.1:7400:7400 and "
             f"127.0.0.1:7401:7401 (loopback: nothing published on every interface)")
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(e.split("=", 1) for e in environment)
    if environment.get("REDLOCKD_CLIENT_SECRET") != secret:
        fail(f"REDLOCKD_CLIENT_SECRET is not taken from the environment: {environment}")
    mount = f"{repo}/docker/redlockd.json:/etc/redlockd/redlockd.json"
    if not any(str(v).startswith(mount) for v in service.get("volumes", [])):
        fail(f"volumes: {service.get('volumes')}, expected {mount}")

def check_config(resolved, config_path):
    compose = load_compose(resolved)
    with open(config_path) as f:
        config = json.load(f)
    wanted = [f"{name}:6379" for name in masters(compose)]
    if config.get("nodes") != wanted:
        fail(f"nodes {config.get('nodes')} != compose masters {wanted}")
    if config.get("listen") != "0.0.0.0:7400":
        fail(f"listen {config.get('listen')!r}, expected 0.0.0.0:7400")

def check_dockerfile(path, repo):
    import os
    text = open(path).read()
    lines = [l.strip() for l in re.sub(r"\\\n", " ", text).splitlines()
             if l.strip() and not l.lstrip().startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    if len(froms) < 2 or not all(l.split()[1] == "debian:bookworm-slim" for l in froms):
        fail(f"expected a multi-stage build on debian:bookworm-slim: {froms}")
    runtime = lines[lines.index(froms[-1]):]
    def directive(name):
        return [l for l in runtime if l.upper().startswith(name + " ")]
    users = directive("USER")
    if not users or users[-1].split()[1] in ("root", "0"):
        fail(f"the runtime stage must run as a non-root user: {users}")
    if any(re.search(r"-dev\b|build-essential", l) for l in runtime if l.upper().startswith("RUN ")):
        fail("the runtime stage installs build packages")
    if not any("7400" in l.split() for l in directive("EXPOSE")):
        fail(f"EXPOSE 7400 missing: {directive('EXPOSE')}")
    health = " ".join(directive("HEALTHCHECK"))
    if "/healthz" not in health or "7401" not in health or "ping" in health.lower():
        fail(f"HEALTHCHECK does not ask 127.0.0.1:7401/healthz (which knows quorum): {health}")
    entry = " ".join(directive("ENTRYPOINT"))
    if not re.search(r'redlockd"?,? +"?--config"?,? +"?/etc/redlockd/redlockd\.json', entry):
        fail(f"ENTRYPOINT is not redlockd --config /etc/redlockd/redlockd.json: {entry}")
    if not any("docker/redlockd.json /etc/redlockd/redlockd.json" in l for l in directive("COPY")):
        fail("the runtime stage does not copy docker/redlockd.json to /etc/redlockd/redlockd.json")
    for l in lines:  # every COPY from the build context must exist
        words = l.split()
        if words[0].upper() == "COPY" and not any(w.startswith("--from") for w in words):
            for source in [w for w in words[1:-1] if not w.startswith("--")]:
                if not os.path.exists(os.path.join(repo, source)):
                    fail(f"COPY source {source} does not exist in the repository")

what = sys.argv[1]
try:
    {"masters": check_masters, "redlockd": check_redlockd, "config": check_config,
     "dockerfile": check_dockerfile}[what](*sys.argv[2:])
except ImportError as e:
    fail(f"{e} (Debian package python3-yaml)")
except (KeyError, TypeError, ValueError, OSError) as e:
    fail(f"{type(e).__name__}: {e}")
PY
py() { have python3 python3 && python3 "$work/checks.py" "$@"; }

check "compose masters: redis 7, noeviction, AOF everysec, no replication, health check, own volume" \
  py masters "$resolved"
check "compose redlockd: built from docker/Dockerfile, waits for healthy masters, loopback ports, secret, config mounted" \
  py redlockd "$resolved" "$root" "$test_secret"
check "docker/redlockd.json: nodes are exactly the compose masters (redis1:6379..redis5:6379)" \
  py config "$resolved" "$root/docker/redlockd.json"
check "Dockerfile: bookworm-slim stages, non-root, EXPOSE 7400, /healthz health check" \
  py dockerfile "$root/docker/Dockerfile" "$root"

# --- the daemon accepts the shipped configs ----------------------------------------------------

# The image's HEALTHCHECK command itself, with 7401 replaced by a free port, against this daemon
# in front of one redis-server: it succeeds while the master answers and fails once it is gone
# (a PING would still be answered then).
healthcheck_knows_quorum() {
  have redis-server redis-server && have python3 python3 || return 1
  local dir=$work/health redis_port listen_port metrics_port redis_pid daemon_pid status=0 cmd=()
  mkdir -p "$dir"
  read -r redis_port listen_port metrics_port < <(python3 "$root/tests/support/free_ports.py" 3)
  [ -n "$metrics_port" ] || return 1
  mapfile -d '' cmd < <(python3 - "$root/docker/Dockerfile" "$metrics_port" <<'PY'
import json, re, sys
text = re.sub(r"\\\n", " ", open(sys.argv[1]).read())
line = next(l for l in text.splitlines() if l.strip().upper().startswith("HEALTHCHECK"))
for arg in json.loads(re.search(r"CMD\s+(\[.*\])", line).group(1)):
    sys.stdout.write(arg.replace("7401", sys.argv[2]) + "\0")
PY
  )
  [ ${#cmd[@]} -gt 0 ] || { echo "no exec-form HEALTHCHECK CMD in docker/Dockerfile"; return 1; }
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" &
  redis_pid=$!
  printf '{"listen": "127.0.0.1:%s", "nodes": ["127.0.0.1:%s"], "metrics_listen": "127.0.0.1:%s"}\n' \
    "$listen_port" "$redis_port" "$metrics_port" >"$dir/redlockd.json"
  "$binary" --config "$dir/redlockd.json" 2>"$dir/redlockd.log" &
  daemon_pid=$!
  eventually() { # command...: true once it succeeds within 30 s (a start-up bound, not a measurement)
    local i
    for i in $(seq 300); do "$@" && return 0; sleep 0.1; done
    return 1
  }
  fails() { ! "$@"; }
  if ! eventually "${cmd[@]}"; then
    echo "the health check never succeeded with the master up: ${cmd[*]}"
    status=1
  else
    kill "$redis_pid"
    wait "$redis_pid" 2>/dev/null
    eventually fails "${cmd[@]}" ||
      { echo "the health check still succeeds with the only master gone: ${cmd[*]}"; status=1; }
  fi
  kill "$daemon_pid" "$redis_pid" 2>/dev/null
  wait "$daemon_pid" 2>/dev/null
  [ $status -eq 0 ] || { echo "--- redlockd log"; tail -n 20 "$dir/redlockd.log"; }
  return $status
}

if [ -n "$binary" ]; then
  check "Dockerfile HEALTHCHECK: healthy while a quorum is usable, unhealthy without one" \
    healthcheck_knows_quorum
  check "redlockd --check-config accepts docker/redlockd.json" \
    "$binary" --check-config --config "$root/docker/redlockd.json"
  check "redlockd --check-config accepts config/redlockd.json" \
    "$binary" --check-config --config "$root/config/redlockd.json"
elif [ -n "$build" ]; then
  # A build directory without its daemon: ctest ran this before the build finished. Not a pass.
  echo "FAIL redlockd --check-config accepts the shipped configs: no redlockd in $build" \
    "(run it after the build)"
  failed=$((failed + 1))
else
  skip "redlockd --check-config accepts docker/redlockd.json and config/redlockd.json" "no binary given"
fi

summary="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || summary+=", $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
