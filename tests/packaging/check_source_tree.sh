#!/usr/bin/env bash
# The build never writes into the source tree. From the checkout's root as working directory (where
# `cmake --install build` once left install-rendered/redlockd.service), this runs
#   - a fresh configure into a scratch build directory outside the checkout (tests and bench on,
#     so every configure-time rule runs),
#   - the build steps that generate files (the embedded Lua scripts; the man pages when scdoc is
#     there),
#   - `cmake --install BUILD_DIR` into a scratch DESTDIR, for a package prefix and /opt,
# and fails if `git status --ignored` of the checkout differs afterwards: a new file (ignored or
# not) or a changed one. Compiling is left out: a compiler only writes its object file.
#   tests/packaging/check_source_tree.sh BUILD_DIR
# Needs git and a git checkout (CI clones one); says so and fails otherwise.
set -uo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v git >/dev/null || { echo "FAIL: git is not installed (Debian package git)"; exit 1; }
git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
  { echo "FAIL: $root is not a git checkout: nothing to compare the tree with"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Untracked and ignored entries (directories collapsed) and changed tracked files.
snapshot() { git -C "$root" status --porcelain=v1 --ignored=matching --untracked-files=normal; }
snapshot >"$work/before"

failed=0
run() { # description, command... (from the checkout's root)
  if ! (cd "$root" && "$@") >"$work/step.log" 2>&1; then
    echo "FAIL $1 failed:"
    sed 's/^/     /' "$work/step.log"
    failed=$((failed + 1))
    return 1
  fi
  echo "ok   $*"
}
run cmake -S "$root" -B "$work/build" -DREDLOCKD_BUILD_TESTS=ON -DREDLOCKD_BUILD_BENCH=ON
targets=(redlockd_lua_scripts)
grep -q '^REDLOCKD_BUILD_MAN:INTERNAL=ON' "$work/build/CMakeCache.txt" 2>/dev/null && targets+=(man)
run cmake --build "$work/build" --target "${targets[@]}"
for prefix in /usr /opt/redlockd; do
  run env DESTDIR="$work/root$prefix" cmake --install "$build" --prefix "$prefix"
done

snapshot >"$work/after"
if ! diff -u "$work/before" "$work/after" >"$work/diff"; then
  echo "FAIL the checkout changed (git status --ignored, before and after):"
  sed 's/^/     /' "$work/diff"
  failed=$((failed + 1))
fi
if [ "$failed" -gt 0 ]; then
  echo "$failed check(s) failed"
  exit 1
fi
echo "configure, generate and install left $root as it was"
