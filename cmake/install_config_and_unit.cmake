# Runs inside `cmake --install` (and cpack), where the install prefix is finally known: a build
# configured with the default prefix and installed with `cmake --install build --prefix /usr`
# must still put the config in /etc/redlockd and point the unit's ExecStart at /usr/bin.
# Set by the install(CODE) that includes this file: REDLOCKD_SOURCE_DIR, REDLOCKD_BINARY_DIR
# (the build directory: an install script's own CMAKE_CURRENT_BINARY_DIR is the caller's working
# directory), REDLOCKD_BINDIR,
# REDLOCKD_SYSCONFDIR, REDLOCKD_DOCDIR, REDLOCKD_UNITDIR (as configured; relative to the prefix
# unless absolute).

# GNUInstallDirs' CMAKE_INSTALL_FULL_<dir> rules, applied to the install-time prefix: sysconfdir
# is /etc for the prefixes / and /usr, and /etc/opt/<name> for /opt/<name>.
function(redlockd_full_dir out dir kind)
  string(REGEX REPLACE "/+$" "" prefix "${CMAKE_INSTALL_PREFIX}")
  if(IS_ABSOLUTE "${dir}")
    set(full "${dir}")
  elseif(kind STREQUAL "sysconf" AND (prefix STREQUAL "" OR prefix STREQUAL "/usr"))
    set(full "/${dir}")
  elseif(kind STREQUAL "sysconf" AND prefix MATCHES "^/opt/")
    set(full "/${dir}${prefix}")
  else()
    set(full "${prefix}/${dir}")
  endif()
  set(${out} "${full}" PARENT_SCOPE)
endfunction()

redlockd_full_dir(CMAKE_INSTALL_FULL_BINDIR "${REDLOCKD_BINDIR}" plain)
redlockd_full_dir(CMAKE_INSTALL_FULL_SYSCONFDIR "${REDLOCKD_SYSCONFDIR}" sysconf)
redlockd_full_dir(CMAKE_INSTALL_FULL_DOCDIR "${REDLOCKD_DOCDIR}" plain)
redlockd_full_dir(unit_dir "${REDLOCKD_UNITDIR}" plain)

# file(INSTALL) adds $DESTDIR and records the files in install_manifest.txt.
file(INSTALL "${REDLOCKD_SOURCE_DIR}/config/redlockd.json"
     DESTINATION "${CMAKE_INSTALL_FULL_SYSCONFDIR}/redlockd")

set(rendered "${REDLOCKD_BINARY_DIR}/install-rendered/redlockd.service")
configure_file("${REDLOCKD_SOURCE_DIR}/config/redlockd.service.in" "${rendered}" @ONLY)
file(INSTALL "${rendered}" DESTINATION "${unit_dir}")
