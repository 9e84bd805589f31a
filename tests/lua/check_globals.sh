#!/bin/sh
# Fails when a Lua script reads a global other than what Redis gives a script, or sets any:
# such a name is a helper the build left out of the text (cmake/embed_lua.cmake, used_helpers)
# or a typo, and would fail only when that line runs on a master.
#   check_globals.sh LUAC FILE...
luac=$1
shift
status=0
for f in "$@"; do
  bad=$("$luac" -l -p "$f" | grep -o '[GS]ETGLOBAL.*; [A-Za-z_0-9]*' | awk '
    $1 == "SETGLOBAL" { print "sets " $NF; next }
    $NF !~ /^(redis|KEYS|ARGV|string|math|table|tonumber|tostring|type|ipairs|pairs|unpack|select|error|pcall|next)$/ {
      print "reads " $NF
    }' | sort -u | tr '\n' ' ')
  if [ -n "$bad" ]; then
    echo "$f: $bad"
    status=1
  fi
done
exit $status
