// `redlockctl run`'s watch over a running command and its KEEP lock: signals passed on to the
// command's group, LOST and a broken connection, the PING heartbeat, SIGTERM then SIGKILL.
#pragma once

#include "redlockd/ctl/line_connection.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <sys/types.h>

namespace redlockd::ctl {

struct supervision_result {
  int status = 0;               // the command's wait status
  bool lost = false;            // the lock was lost while the command ran
  bool connection_open = false; // the KEEP connection still works: release the lock on it
};

// Watches `child` (the leader of the command's process group) and the KEEP lock on `connection`
// until the whole group is gone. Signals arrive as bytes on `signal_fd` (SIGCHLD wakes it up; the
// others are passed on to the group). Throws std::runtime_error if poll fails.
supervision_result supervise(line_connection& connection, const run_options& options, pid_t child,
                             int signal_fd);

} // namespace redlockd::ctl
