#!/usr/bin/env bash
# Builds the .deb with cpack from BUILD_DIR, installs it on this machine with dpkg -i, checks what
# it installed, runs the installed daemon's --check-config on the installed config and
# systemd-analyze verify on the installed unit, then removes and purges it. The package is
# purged again on any exit, failure included.
#   tests/packaging/check_deb.sh BUILD_DIR VERSION
# Needs root (dpkg -i), and the Debian packages dpkg-dev and file (dpkg-shlibdeps), systemd
# (systemd-analyze), scdoc (the man pages) and python3-debian (the copyright file's format).
# A missing tool is a failure, not a skip.
set -uo pipefail
[ $# -eq 2 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR VERSION" >&2; exit 2; }
build=$(cd "$1" && pwd)
version=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
package=redlockd

missing=()
for tool in cpack:cmake dpkg:dpkg dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev file:file \
  systemd-analyze:systemd gzip:gzip man:man-db; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool%%:*} (Debian package ${tool#*:})")
done
/usr/bin/python3 -c 'import debian.copyright' 2>/dev/null ||
  missing+=("Debian's python3 with debian.copyright (Debian package python3-debian)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: missing ${missing[*]}; scripts/setup --test installs them"
  exit 1
fi
[ "$(id -u)" -eq 0 ] || { echo "FAIL: dpkg -i needs root (CI runs as root)"; exit 1; }
grep -q '^REDLOCKD_BUILD_MAN:INTERNAL=ON' "$build/CMakeCache.txt" ||
  { echo "FAIL: $build was configured without man pages (scdoc not found; Debian package scdoc)"; exit 1; }

# Never touch an installation this test did not make.
if dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qv '^not-installed$'; then
  echo "FAIL: $package is already installed (dpkg -s $package); remove it with dpkg --purge $package"
  exit 1
fi
for path in /usr/bin/redlockd /usr/bin/redlockctl /etc/redlockd/redlockd.json \
  /usr/lib/systemd/system/redlockd.service /lib/systemd/system/redlockd.service; do
  [ ! -e "$path" ] || { echo "FAIL: $path exists (installed by hand?); the test would overwrite it"; exit 1; }
done

work=$(mktemp -d)
installed=0
cleanup() {
  if [ "$installed" -eq 1 ] && dpkg-query -W "$package" >/dev/null 2>&1; then
    echo "cleanup: dpkg --purge $package"
    dpkg --purge "$package" >/dev/null 2>&1 || echo "cleanup: dpkg --purge $package FAILED"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# --- build -------------------------------------------------------------------------------------
arch=$(dpkg --print-architecture)
deb=$work/${package}_${version}_${arch}.deb
# CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: package what is built (and tested) now; without it cpack's
# preinstall step would first rebuild every stale target of the build directory, tests included.
if ! (cd "$build" && cpack -G DEB -B "$work" -D CMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON) \
  >"$work/cpack.log" 2>&1; then
  echo "FAIL cpack -G DEB:"
  sed 's/^/     /' "$work/cpack.log"
  exit 1
fi
[ -f "$deb" ] || { echo "FAIL cpack did not make $(basename "$deb"): $(ls "$work")"; exit 1; }
ok "cpack -G DEB made $(basename "$deb")"

depends=$(dpkg-deb -f "$deb" Depends)
want_depends=(libc6 libssl3 libhiredis0.14 libsystemd0 libstdc++6)
depends_names=$(sed 's/, */\n/g' <<<"$depends" | awk '{print $1}')
lacking=()
for want in "${want_depends[@]}"; do
  grep -qxF "$want" <<<"$depends_names" || lacking+=("$want")
done
if [ ${#lacking[@]} -eq 0 ]; then
  ok "Depends (from dpkg-shlibdeps): $depends"
else
  fail "Depends lacks ${lacking[*]} (dpkg-shlibdeps): $depends"
fi
[ "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(dpkg-deb -f "$deb" Architecture)" = \
  "$package $version $arch" ] || fail "control: $(dpkg-deb -f "$deb" Package Version Architecture)"

# --- install -----------------------------------------------------------------------------------
installed=1
if ! dpkg -i "$deb" >"$work/dpkg-i.log" 2>&1; then
  echo "FAIL dpkg -i:"
  sed 's/^/     /' "$work/dpkg-i.log"
  exit 1
fi
ok "dpkg -i $(basename "$deb")"

expected=(
  /usr/bin/redlockd /usr/bin/redlockctl
  /etc/redlockd/redlockd.json
  /usr/lib/systemd/system/redlockd.service
  /usr/share/man/man8/redlockd.8.gz /usr/share/man/man1/redlockctl.1.gz
  /usr/share/man/man5/redlockd.json.5.gz
  /usr/share/doc/redlockd/README.md /usr/share/doc/redlockd/PROTOCOL.md
  /usr/share/doc/redlockd/docs/operations.md /usr/share/doc/redlockd/copyright
  /usr/share/doc/redlockd/examples/redis-master@.service
  /usr/share/doc/redlockd/examples/redis-master.conf
  /usr/share/doc/redlockd/examples/redlockd-alerts.yml
  /usr/share/doc/redlockd/examples/redlockd-dashboard.json
)
# The bash completion comes with redlockctl's own branch (config/redlockctl.bash-completion and
# its install rule): expected only once that file is in the source tree.
if [ -f "$root/config/redlockctl.bash-completion" ]; then
  expected+=(/usr/share/bash-completion/completions/redlockctl)
fi
listed=$(dpkg -L "$package")
for path in "${expected[@]}"; do
  if ! grep -qx "$path" <<<"$listed"; then
    fail "dpkg -L $package does not list $path"
  elif [ ! -f "$path" ]; then
    fail "$path is listed but not on disk"
  fi
done
ok "installed files: ${#expected[@]} expected ones checked"
stray=$(grep -Ev -e '^/usr(/|$)' -e '^/etc(/redlockd(/|$)|$)' -e '^/\.$' <<<"$listed")
[ -z "$stray" ] || fail "files outside /usr and /etc/redlockd: $stray"
for binary in /usr/bin/redlockd /usr/bin/redlockctl; do
  [ -x "$binary" ] || fail "$binary is not executable"
  file -b "$binary" | grep -q 'stripped$' && ! file -b "$binary" | grep -q 'not stripped' ||
    fail "$binary is not stripped: $(file -b "$binary")"
done

conffiles=$(dpkg-query -W -f='${Conffiles}\n' "$package")
grep -q '^ */etc/redlockd/redlockd.json ' <<<"$conffiles" && ok "/etc/redlockd/redlockd.json is a conffile" ||
  fail "/etc/redlockd/redlockd.json is not a conffile: $conffiles"
cmp -s /etc/redlockd/redlockd.json "$root/config/redlockd.json" ||
  fail "/etc/redlockd/redlockd.json differs from config/redlockd.json"

# The copyright file parses as machine-readable debian/copyright (python3-debian, strict), every
# file is Apache-2.0, and the license text it points to is the repository's LICENSE.
copyright_ok() {
  /usr/bin/python3 - /usr/share/doc/redlockd/copyright <<'PY'
import sys
import debian.copyright as dc
with open(sys.argv[1]) as f:
    parsed = dc.Copyright(f, strict=True)
files = [(p.files, p.license.synopsis) for p in parsed.all_files_paragraphs()]
if files != [(("*",), "Apache-2.0")]:
    sys.exit(f"Files paragraphs: {files}, expected one: * under Apache-2.0")
if not parsed.header.upstream_name == "redlockd":
    sys.exit(f"Upstream-Name: {parsed.header.upstream_name}")
PY
}
if out=$(copyright_ok 2>&1); then
  ok "/usr/share/doc/redlockd/copyright is machine-readable (Format 1.0), Files: * Apache-2.0"
else
  fail "/usr/share/doc/redlockd/copyright: $out"
fi
grep -q '/usr/share/common-licenses/Apache-2.0' /usr/share/doc/redlockd/copyright &&
  cmp -s /usr/share/common-licenses/Apache-2.0 "$root/LICENSE" ||
  fail "copyright does not point to /usr/share/common-licenses/Apache-2.0, or that differs from LICENSE"

for page in man8/redlockd.8 man1/redlockctl.1 man5/redlockd.json.5; do
  gzip -dc "/usr/share/man/$page.gz" | grep -q '^\.TH ' || fail "/usr/share/man/$page.gz is not a roff man page"
done

# --- run what it installed ------------------------------------------------------------------------
if out=$(/usr/bin/redlockd --version 2>&1) && [ "$out" = "redlockd $version" ]; then
  ok "/usr/bin/redlockd --version: $out"
else
  fail "/usr/bin/redlockd --version: $out"
fi
/usr/bin/redlockctl --help >/dev/null 2>&1 || fail "/usr/bin/redlockctl --help failed"
if out=$(/usr/bin/redlockd --check-config --config /etc/redlockd/redlockd.json 2>&1); then
  ok "redlockd --check-config --config /etc/redlockd/redlockd.json: $out"
else
  fail "redlockd --check-config --config /etc/redlockd/redlockd.json: $out"
fi
unit=/usr/lib/systemd/system/redlockd.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$exec_start" = "/usr/bin/redlockd --config /etc/redlockd/redlockd.json" ] ||
  fail "ExecStart=$exec_start"
# systemd-analyze verify prints some problems and still exits 0: any line naming the unit fails.
if out=$(systemd-analyze verify "$unit" 2>&1) && ! grep -q redlockd.service <<<"$out"; then
  ok "systemd-analyze verify $unit"
else
  fail "systemd-analyze verify $unit: $out"
fi

# --- remove, purge -------------------------------------------------------------------------------
if dpkg -r "$package" >"$work/dpkg-r.log" 2>&1; then
  [ ! -e /usr/bin/redlockd ] || fail "dpkg -r left /usr/bin/redlockd"
  [ ! -e "$unit" ] || fail "dpkg -r left $unit"
  [ -f /etc/redlockd/redlockd.json ] || fail "dpkg -r removed the conffile (only purge should)"
  ok "dpkg -r $package (conffile kept)"
else
  fail "dpkg -r: $(cat "$work/dpkg-r.log")"
fi
if dpkg --purge "$package" >"$work/dpkg-purge.log" 2>&1; then
  [ ! -e /etc/redlockd/redlockd.json ] || fail "dpkg --purge left /etc/redlockd/redlockd.json"
  ! dpkg-query -W "$package" >/dev/null 2>&1 || fail "dpkg still knows $package after --purge"
  ok "dpkg --purge $package"
else
  fail "dpkg --purge: $(cat "$work/dpkg-purge.log")"
fi

if [ "$failed" -gt 0 ]; then
  echo "$failed check(s) failed"
  exit 1
fi
echo "the .deb builds, installs, runs and removes cleanly"
