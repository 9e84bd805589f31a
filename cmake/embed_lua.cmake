# Writes the Lua scripts of src/lua into one C++ include, so that the daemon, the simulator and
# the tests run the very text of the .lua files. A script's text is prelude.lua, then each
# library its first lines name with `--#include <name>` (src/lua/lib/<name>.lua, in that order),
# then the script's own file (the helpers go at its '--#helpers' line where it has one). Each
# assembled text is also written to <GENERATED>/lua/<name>.lua (for luac -p and for readers).
# Run at build time (see redlockd_core in CMakeLists.txt):
#   cmake -DLUA_DIR=<src/lua> -DGENERATED=<dir> -DSCRIPTS="acquire;release;..." -P embed_lua.cmake
# The helpers (prelude and libraries) a script never calls are left out of its text: see
# used_helpers below.
cmake_minimum_required(VERSION 3.25)
file(READ "${LUA_DIR}/prelude.lua" prelude)
set(delimiter "redlockd_lua")

# Writes `content` to `path` only when it changed, so that an unchanged script does not rebuild.
function(write_if_changed path content)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL content)
    file(WRITE "${path}" "${content}")
  endif()
endfunction()

# Sets `out` to the parts of `helpers` (the prelude and libraries, in order) that script
# `body` needs. Lua makes every function of a script anew at each call, so a helper the script
# never calls costs every call anyway: the release paid for the whole grant (more than a
# quarter of its instructions on a master). A part is the text from a blank line followed by a
# line at column 0 to the next such blank line; it is kept when the script, or a part kept,
# names a local the part declares at column 0 (`local function f`, or `local a, b` without a
# value), or when it declares none (comments). Comments name no helper. The test "lua: ...
# reads no global but Redis's" fails when a helper that was needed is left out.
function(used_helpers helpers body out)
  string(ASCII 1 cut)
  # A part is dropped whole, so one must hold nothing but declarations: a statement at top level
  # (a SET, an assignment to another part's local, a check) would go with it unseen, and a long
  # comment or string could be cut open. Such text fails the build instead.
  string(FIND "${helpers}" "[[" long)
  string(FIND "${helpers}" "${cut}" cuts)
  if(NOT long EQUAL -1 OR NOT cuts EQUAL -1)
    message(FATAL_ERROR "src/lua helpers: no long strings or comments ([[) and no byte 0x01")
  endif()
  string(REGEX REPLACE "\n\n([^ \n])" "\n\n${cut}\\1" helpers "${helpers}")
  string(REGEX REPLACE "--[^\n]*" "" used "${body}")
  set(count 0)
  while(NOT helpers STREQUAL "")
    string(FIND "${helpers}" "${cut}" at)
    if(at EQUAL -1)
      set(part "${helpers}")
      set(helpers "")
    else()
      string(SUBSTRING "${helpers}" 0 ${at} part)
      math(EXPR at "${at} + 1")
      string(SUBSTRING "${helpers}" ${at} -1 helpers)
    endif()
    string(REGEX REPLACE "--[^\n]*" "" code "\n${part}")
    # (Each newline doubled: a declaration that ends its line leaves the next one its own.)
    string(REPLACE "\n" "\n\n" lines "${code}")
    string(REGEX MATCHALL "\nlocal function [A-Za-z0-9_]+|\nlocal [A-Za-z0-9_, ]+( =|\n)"
           declarations "${lines}")
    string(REGEX REPLACE "\nlocal function [A-Za-z0-9_]+\\([^\n]*" "" rest "${lines}")
    string(REGEX REPLACE "\nlocal [A-Za-z0-9_, ]+\n" "\n" rest "${rest}")
    string(REGEX REPLACE "\nend\n" "\n" rest "${rest}")
    string(REGEX MATCH "\n[^ \n][^\n]*" statement "${rest}")
    if(statement)
      string(STRIP "${statement}" statement)
      message(FATAL_ERROR "src/lua helpers: a top-level line that is not a declaration without "
                          "a value, a function or its end: '${statement}'")
    endif()
    set(names "")
    foreach(declaration IN LISTS declarations)
      string(REGEX REPLACE "^\nlocal (function )?([A-Za-z0-9_, ]+)( =|\n)?$" "\\2" declared
             "${declaration}")
      string(REPLACE ", " ";" declared "${declared}")
      list(APPEND names ${declared})
    endforeach()
    set(part_${count} "${part}")
    set(code_${count} "${code}")
    set(names_${count} "${names}")
    set(kept_${count} FALSE)
    if(names STREQUAL "")
      set(kept_${count} TRUE)
    endif()
    math(EXPR count "${count} + 1")
  endwhile()
  # Keep what is named by the kept text, until nothing more is.
  set(grew TRUE)
  while(grew)
    set(grew FALSE)
    foreach(i RANGE ${count})
      if(i EQUAL count OR kept_${i})
        continue()
      endif()
      foreach(name IN LISTS names_${i})
        if(used MATCHES "(^|[^A-Za-z0-9_.])${name}([^A-Za-z0-9_]|$)")
          set(kept_${i} TRUE)
          string(APPEND used "${code_${i}}")
          set(grew TRUE)
          break()
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(text "")
  foreach(i RANGE ${count})
    if(NOT i EQUAL count AND kept_${i})
      string(APPEND text "${part_${i}}")
    endif()
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(text "// Generated by cmake/embed_lua.cmake from src/lua; edit those files, not this one.\n")
foreach(name IN LISTS SCRIPTS)
  file(READ "${LUA_DIR}/${name}.lua" body)
  file(STRINGS "${LUA_DIR}/${name}.lua" includes REGEX "^--#include ")
  set(helpers "${prelude}")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^--#include +([a-z_]+) *$" "\\1" library "${line}")
    if(NOT EXISTS "${LUA_DIR}/lib/${library}.lua")
      message(FATAL_ERROR "src/lua/${name}.lua includes '${library}': no src/lua/lib/${library}.lua")
    endif()
    file(READ "${LUA_DIR}/lib/${library}.lua" library_text)
    string(APPEND helpers "\n${library_text}") # (a blank line: the library starts a part)
  endforeach()
  used_helpers("${helpers}" "${body}" kept)
  # The helpers go at the script's '--#helpers' line, or before it all. A master makes each
  # function anew whenever the run reaches its definition, so a fast path above that line that
  # returns before it (release.lua's, without a wait mark) makes none.
  string(FIND "${body}" "\n--#helpers\n" at)
  if(at EQUAL -1)
    set(source "${kept}${body}")
  else()
    math(EXPR at "${at} + 1")
    string(SUBSTRING "${body}" 0 ${at} fast)
    string(SUBSTRING "${body}" ${at} -1 rest)
    set(source "${fast}${kept}${rest}")
  endif()
  string(FIND "${source}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "src/lua/${name}.lua contains the raw-string delimiter )${delimiter}\"")
  endif()
  write_if_changed("${GENERATED}/lua/${name}.lua" "${source}")
  string(APPEND text "constexpr std::string_view lua_${name} = R\"${delimiter}(${source})${delimiter}\";\n")
endforeach()
write_if_changed("${GENERATED}/redlockd/lua_scripts.inc" "${text}")
