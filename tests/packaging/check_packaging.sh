#!/usr/bin/env bash
# Checks the systemd units and the docker-compose file without a systemd or Docker engine:
#   tests/packaging/check_packaging.sh BUILD_DIR
# BUILD_DIR holds the built redlockd and the configured redlockd.service.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: check_packaging.sh BUILD_DIR}
build=$(cd "$build" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
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

# systemd-analyze verify prints problems and still exits 0 for some of them: any line that
# names the unit is a failure.
verify_unit() { # unit file
  local out
  out=$(systemd-analyze verify "$1" 2>&1)
  local status=$?
  if [ $status -ne 0 ] || printf '%s' "$out" | grep -q "$(basename "$1")"; then
    printf '%s\n' "$out"
    return 1
  fi
}

# The installed unit, pointed at the freshly built binary and the repository's config.
sed -e "s|^ExecStart=.*|ExecStart=$build/redlockd --config $root/config/redlockd.json|" \
  "$build/redlockd.service" >"$work/redlockd.service"
check "systemd-analyze verify redlockd.service" verify_unit "$work/redlockd.service"
check "redlockd.service is Type=notify with a watchdog" \
  grep -q -e '^Type=notify' -e '^WatchdogSec=' "$work/redlockd.service"
cp "$root/config/redis-master@.service" "$work/redis-master@7001.service"
check "systemd-analyze verify redis-master@7001.service" verify_unit "$work/redis-master@7001.service"

compose="$root/docker/docker-compose.yml"
check "docker-compose config parses the compose file" docker-compose -f "$compose" config -q

services_match() {
  local services
  services=$(docker-compose -f "$compose" config --services | sort | tr '\n' ' ')
  [ "$services" = "redis1 redis2 redis3 redis4 redis5 redlockd " ] ||
    { echo "services: $services"; return 1; }
}
check "compose runs five masters and redlockd" services_match

config_names_masters() {
  python3 - "$root/docker/redlockd.json" "$compose" <<'PY'
import json, sys, yaml
config = json.load(open(sys.argv[1]))
compose = yaml.safe_load(open(sys.argv[2]))
masters = sorted(name for name in compose["services"] if name != "redlockd")
wanted = [f"{name}:6379" for name in masters]
if sorted(config["nodes"]) != wanted or len(wanted) != 5:
    sys.exit(f"config nodes {config['nodes']} != compose masters {wanted}")
for name in masters:
    command = " ".join(compose["services"][name]["command"])
    for setting in ("--maxmemory-policy noeviction", "--appendonly yes", "--appendfsync everysec"):
        if setting not in command:
            sys.exit(f"{name}: missing {setting}")
    if "replicaof" in command or "slaveof" in command:
        sys.exit(f"{name}: masters must be independent")
PY
}
check "the daemon's config names exactly the five master services" config_names_masters
check "redlockd --check-config accepts docker/redlockd.json" \
  "$build/redlockd" --check-config --config "$root/docker/redlockd.json"
check "redlockd --check-config accepts config/redlockd.json" \
  "$build/redlockd" --check-config --config "$root/config/redlockd.json"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
