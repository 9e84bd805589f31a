// `redlockctl run`: hold a KEEP lock while a command runs; kill the command if the lock is lost.
#pragma once

#include "redlockd/ctl/line_connection.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace redlockd::ctl {

// redlockctl's exit codes.
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int busy = 1;
inline constexpr int no_quorum = 2;
inline constexpr int not_held = 3;
inline constexpr int refused = 4;     // ERR ...
inline constexpr int unreachable = 5; // cannot connect, connection lost, timeout
inline constexpr int auth_failed = 6; // AUTH refused, or ERR NOAUTH: no secret was given
inline constexpr int usage = 64;
// run only:
inline constexpr int run_failed = 125;     // failed before the command ran
inline constexpr int not_executable = 126; // found but could not be run
inline constexpr int not_found = 127;
} // namespace exit_code

struct run_options {
  std::string resource;               // the first of `resources`: what LOST names
  std::vector<std::string> resources; // more than one: MLOCK (empty: just `resource`)
  bool shared = false;                // LOCK ... SHARED
  unsigned permits = 0;               // LOCK ... PERMITS n; 0: not a semaphore
  std::chrono::milliseconds ttl{10'000};
  std::chrono::milliseconds wait{0};
  // After LOST or a lost connection: SIGTERM at once, SIGKILL after this long.
  std::chrono::milliseconds kill_after{0}; // 0: the default, see default_kill_after()
  std::vector<std::string> command;        // argv, run without a shell
  std::chrono::milliseconds timeout{5'000};
  int conflict_exit_code = exit_code::busy; // when the lock is held by someone else
  bool json = false; // after the command: {"resource","fence","exit_code","lost"} on stdout
};

// The request that takes a lock on `resources` for `ttl`, without WAIT or KEEP: "LOCK <r> <ttl>"
// with " SHARED" or " PERMITS <n>" (one resource), "MLOCK <n> <r1> .. <rn> <ttl>" (several).
std::string lock_request_line(const std::vector<std::string>& resources,
                              std::chrono::milliseconds ttl, bool shared, unsigned permits);

// What releases or extends a hold of `resources`, up to the owner: "UNLOCK <r>" or "MUNLOCK <n>
// <r1> .. <rn>" (`verb` "UNLOCK"), "EXTEND <r>" or "MEXTEND ..." (`verb` "EXTEND").
std::string resources_request_prefix(const std::string& verb,
                                     const std::vector<std::string>& resources);

// How `run` watches its lock. The daemon pushes LOST while more than a third of the TTL is still
// valid; while it is healthy a KEEP lock has about two thirds left. From either point, SIGKILL
// after kill_after, and noticing a silent daemon within ping_every + silence_limit of its last
// answer, stay inside what is left of the lock.
struct supervision_timing {
  std::chrono::milliseconds kill_after;    // SIGTERM -> SIGKILL of the command's group
  std::chrono::milliseconds ping_every;    // heartbeat on the KEEP connection
  std::chrono::milliseconds silence_limit; // an unanswered PING older than this: the lock is lost
};

// max(1ms, ttl/4 - drift), drift = ttl/100 + 2ms: a quarter, not a third, leaves a margin for
// delivering LOST and for the kill itself.
std::chrono::milliseconds default_kill_after(std::chrono::milliseconds ttl);
supervision_timing timing_for(const run_options& options);

// Takes the lock on `connection`, runs the command, returns the exit code redlockctl exits with.
int run_under_lock(line_connection& connection, const run_options& options);

} // namespace redlockd::ctl
