#!/usr/bin/env bash
# The build stage of docker/Dockerfile must install what `scripts/setup --list build` names, and
# its runtime stage a package for every shared library the two
# binaries load. No Docker engine is needed: `ldd` lists the libraries of the binaries built
# here (Debian 12, as the image), `dpkg -S` maps each to its package, and that package must be
# in the runtime stage's `apt-get install`, or in the allow-list below.
#   tests/packaging/check_docker_libs.sh BUILD_DIR
# Needs: ldd (libc-bin), dpkg, apt-cache (apt), python3.
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
dockerfile=$root/docker/Dockerfile

for tool in ldd dpkg apt-cache python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (Debian 12 has it in the base system)"; exit 1; }
done

# Present in debian:bookworm-slim without being asked for: apt (Priority: required, in every
# Debian image) depends on each of them directly. Checked below against apt's dependencies here.
allowed=(libc6 libgcc-s1 libstdc++6)
failed=0
apt_depends=$(apt-cache depends apt | sed -n 's/^ *|\{0,1\}Depends: //p')
for package in "${allowed[@]}"; do
  grep -qx "$package" <<<"$apt_depends" ||
    { echo "FAIL: allow-listed $package is not a dependency of apt"; failed=$((failed + 1)); }
done

# The packages a stage's RUN apt-get install lines name (stage: first or last).
stage_packages() {
  python3 - "$dockerfile" "$1" <<'PY'
import re, sys
text = re.sub(r"\\\n", " ", open(sys.argv[1]).read())
lines = [l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
froms = [i for i, l in enumerate(lines) if l.upper().startswith("FROM ")]
start, end = (froms[0], froms[1]) if sys.argv[2] == "first" else (froms[-1], len(lines))
for line in lines[start:end]:
    if not line.upper().startswith("RUN "):
        continue
    for command in re.split(r"&&|;", line[4:]):
        words = command.split()
        if words[:2] == ["apt-get", "install"]:
            print("\n".join(w for w in words[2:] if not w.startswith("-")))
PY
}
runtime=$(stage_packages last)
[ -n "$runtime" ] || { echo "FAIL: no apt-get install in the runtime stage of $dockerfile"; exit 1; }

# The build stage installs everything scripts/setup installs to build (libssl-dev among them).
build_stage=$(stage_packages first)
for package in $("$root/scripts/setup" --list build); do
  if grep -qx "$package" <<<"$build_stage"; then
    echo "ok   build stage installs $package"
  else
    echo "FAIL the build stage does not install $package (scripts/setup --list build)"
    failed=$((failed + 1))
  fi
done

# dpkg -S knows each file under the path its package ships it at; with merged /usr, ldd may
# show /lib/... for /usr/lib/... and the other way round, and the soname link for its target.
owner() { # library path
  local candidates=() path
  for path in "$1" "$(readlink -f "$1")"; do
    candidates+=("$path")
    case "$path" in
      /usr/*) candidates+=("${path#/usr}") ;;
      /*) candidates+=("/usr$path") ;;
    esac
  done
  for path in "${candidates[@]}"; do
    dpkg -S "$path" 2>/dev/null | sed -n '1s/:.*//p' | grep . && return 0
  done
  return 1
}

checked=0
for binary in "$build/redlockd" "$build/redlockctl"; do
  [ -x "$binary" ] || { echo "FAIL: $binary is not built"; failed=$((failed + 1)); continue; }
  while read -r library; do
    checked=$((checked + 1))
    if ! package=$(owner "$library"); then
      echo "FAIL: $(basename "$binary") loads $library, which no package owns (dpkg -S)"
      failed=$((failed + 1))
    elif grep -qx "$package" <<<"$runtime"; then
      echo "ok   $(basename "$binary"): $library <- $package (installed by the runtime stage)"
    elif printf '%s\n' "${allowed[@]}" | grep -qx "$package"; then
      echo "ok   $(basename "$binary"): $library <- $package (in the base image: apt depends on it)"
    else
      echo "FAIL $(basename "$binary"): $library <- $package, which the runtime stage does not install"
      failed=$((failed + 1))
    fi
  done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
  # "not found" means this machine cannot even run it.
  if ldd "$binary" | grep -q 'not found'; then
    echo "FAIL: ldd $binary: $(ldd "$binary" | grep 'not found')"
    failed=$((failed + 1))
  fi
done
# linux-vdso.so.1 has no file: the kernel maps it into every process.

[ "$checked" -gt 0 ] || { echo "FAIL: ldd listed no libraries"; exit 1; }
if [ "$failed" -gt 0 ]; then
  echo "$failed problem(s)"
  exit 1
fi
echo "all $checked libraries are provided in the runtime image"
