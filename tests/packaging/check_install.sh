#!/usr/bin/env bash
# `cmake --install BUILD_DIR --prefix P` into a scratch DESTDIR, for the prefixes a user or a
# packager gives, whatever prefix the build was configured with: the binaries, the config, the
# unit (whose ExecStart and --config must name the installed paths), the docs and, when the build
# made them, the man pages.
#   tests/packaging/check_install.sh BUILD_DIR
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# prefix, expected config directory, expected unit directory
check_prefix() {
  local prefix=$1 etc=$2 unitdir=$3 dest=$work/${1//\//_}
  echo "--- cmake --install --prefix $prefix (DESTDIR=$dest)"
  # From an empty working directory, which must stay empty: install scripts write nothing there.
  local cwd=$work/cwd
  rm -rf "$cwd" && mkdir -p "$cwd"
  if ! (cd "$cwd" && DESTDIR=$dest cmake --install "$build" --prefix "$prefix") >"$work/install.log" 2>&1; then
    fail "cmake --install --prefix $prefix failed:"
    sed 's/^/     /' "$work/install.log"
    return
  fi
  [ -z "$(ls -A "$cwd")" ] || fail "cmake --install wrote into its working directory: $(ls -A "$cwd")"
  local want
  for want in "$prefix/bin/redlockd" "$prefix/bin/redlockctl"; do
    [ -x "$dest$want" ] || fail "$want is not an installed executable"
  done
  for want in "$etc/redlockd.json" "$unitdir/redlockd.service" \
    "$prefix/share/doc/redlockd/README.md" "$prefix/share/doc/redlockd/PROTOCOL.md" \
    "$prefix/share/doc/redlockd/copyright" \
    "$prefix/share/doc/redlockd/examples/redis-master@.service" \
    "$prefix/share/doc/redlockd/examples/redis-master.conf" \
    "$prefix/share/doc/redlockd/examples/redlockd-alerts.yml" \
    "$prefix/share/doc/redlockd/examples/redlockd-dashboard.json"; do
    [ -f "$dest$want" ] || fail "$want is missing"
  done
  # The bash completion, once config/redlockctl.bash-completion is in the source tree.
  if [ -f "$root/config/redlockctl.bash-completion" ]; then
    [ -f "$dest$prefix/share/bash-completion/completions/redlockctl" ] ||
      fail "$prefix/share/bash-completion/completions/redlockctl is missing"
  fi
  cmp -s "$dest$etc/redlockd.json" "$root/config/redlockd.json" ||
    fail "$etc/redlockd.json differs from config/redlockd.json"
  local unit=$dest$unitdir/redlockd.service exec
  if [ -f "$unit" ]; then
    exec=$(sed -n 's/^ExecStart=//p' "$unit")
    [ "$exec" = "$prefix/bin/redlockd --config $etc/redlockd.json" ] ||
      fail "ExecStart=$exec, expected $prefix/bin/redlockd --config $etc/redlockd.json"
    ! grep -n '@[A-Za-z_]*@' "$unit" || fail "the unit has unsubstituted @VARIABLES@"
    grep -q "^Documentation=.*file://$prefix/share/doc/redlockd/README.md" "$unit" ||
      fail "Documentation= does not name $prefix/share/doc/redlockd/README.md"
  fi
  # Man pages: only when this build made them (scdoc was found); the .deb test
  # requires them.
  if grep -q '^REDLOCKD_BUILD_MAN:INTERNAL=ON' "$build/CMakeCache.txt"; then
    for want in man8/redlockd.8 man1/redlockctl.1 man5/redlockd.json.5; do
      [ -f "$dest$prefix/share/man/$want.gz" ] || [ -f "$dest$prefix/share/man/$want" ] ||
        fail "$prefix/share/man/$want is missing"
    done
  fi
  # Nothing may land outside the prefix but the config.
  local stray
  stray=$(cd "$dest" && find . -type f | sed 's|^\.||' | grep -v -e "^$prefix/" -e "^$etc/")
  [ -z "$stray" ] || fail "installed outside $prefix and $etc: $stray"
  echo "installed: $(cd "$dest" && find . -type f | wc -l) files"
}

check_prefix /usr /etc/redlockd /usr/lib/systemd/system
check_prefix /usr/local /usr/local/etc/redlockd /usr/local/lib/systemd/system
check_prefix /opt/redlockd /etc/opt/redlockd/redlockd /opt/redlockd/lib/systemd/system

if [ "$failed" -gt 0 ]; then
  echo "$failed check(s) failed"
  exit 1
fi
echo "all install checks passed"
