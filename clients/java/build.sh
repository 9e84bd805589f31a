#!/usr/bin/env bash
# Builds the Java client with the JDK alone (javac and jar: no Maven, no network) and runs its suite.
#   clients/java/build.sh                 compiles for Java 17 and writes <repo>/build-java/redlockd-client.jar
#   clients/java/build.sh test [Class]... that, then the JUnit 5 suite (all of it, or those classes
#                                         of dev.redlockd.client) against real redis-server masters
#                                         and the daemon $REDLOCKD_BIN (default <repo>/build/redlockd)
# Needs a JDK 17 or later (Debian's openjdk-17-jdk-headless); the tests also Debian's junit5 (its
# console launcher), redis-server and openssl. scripts/setup --test installs them.
set -euo pipefail
cd "$(dirname "$0")"

out=../../build-java # the repository's build*/ directories are ignored and left out of source checks
jar=$out/redlockd-client.jar
version=0.1.0

need() { command -v "$1" >/dev/null || { echo "build.sh: $1 not found: $2" >&2; exit 1; }; }
need javac "install a JDK 17 (Debian: openjdk-17-jdk-headless; scripts/setup --test)"
need jar "install a JDK 17 (Debian: openjdk-17-jdk-headless; scripts/setup --test)"

# --release 17: the class files and the API used are Java 17's, whatever JDK compiles them.
javac_flags=(--release 17 -encoding UTF-8 -Xlint:all -Werror)

rm -rf "$out/classes" "$out/test-classes"
mkdir -p "$out/classes/META-INF"
mapfile -t sources < <(find src/main/java -name '*.java' | sort)
javac "${javac_flags[@]}" -d "$out/classes" "${sources[@]}"
if [ -f ../../LICENSE ]; then
  cp ../../LICENSE "$out/classes/META-INF/LICENSE"
fi
cat >"$out/MANIFEST.MF" <<MANIFEST
Automatic-Module-Name: dev.redlockd.client
Implementation-Title: redlockd-client
Implementation-Version: $version
Bundle-License: Apache-2.0
MANIFEST
rm -f "$jar"
jar --create --file "$jar" --manifest "$out/MANIFEST.MF" -C "$out/classes" .
echo "build.sh: wrote $(realpath "$jar")"

[ "${1:-}" = test ] || exit 0
shift

junit=${JUNIT_CONSOLE:-/usr/share/java/junit-platform-console-standalone.jar}
if [ ! -r "$junit" ]; then
  echo "build.sh: the JUnit 5 console launcher is not at $junit: install Debian's junit5" \
    "(scripts/setup --test) or set JUNIT_CONSOLE" >&2
  exit 1
fi
mapfile -t tests < <(find src/test/java -name '*.java' | sort)
javac "${javac_flags[@]}" -d "$out/test-classes" -cp "$jar:$junit" "${tests[@]}"

select=(--select-package dev.redlockd.client)
if [ $# -gt 0 ]; then
  select=()
  for class in "$@"; do select+=(--select-class "dev.redlockd.client.$class"); done
fi
# The tests run against the jar (what is shipped); ReadmeExampleTest runs the README's example with it.
java -Dredlockd.jar="$PWD/$jar" -jar "$junit" --disable-banner --disable-ansi-colors \
  --details=tree --fail-if-no-tests --include-engine=junit-jupiter --class-path "$out/test-classes:$jar" "${select[@]}"
