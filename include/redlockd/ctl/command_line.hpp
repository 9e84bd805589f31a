// redlockctl's command line: the usage text, the parsed command line, and the checks on it that
// need nothing but the arguments themselves (no environment, no files, no network).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlockd::ctl {

// The text of `redlockctl --help`.
extern const char* const usage_text;

// A command line redlockctl refuses; the message names the option or argument at fault.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// -h or --help anywhere before "--": print usage_text, whatever else the line says.
struct help_requested {};
// --version on an otherwise well-formed line.
struct version_requested {};

// Everything the command line says, after parsing. Values are kept as written; durations and
// addresses are read by duration_of() and split_addresses().
struct command_line {
  std::string command; // lock, unlock, extend, status, list, break, info, ping or run
  std::vector<std::string> positional;
  // lock and run: every positional; unlock and extend: all but the last (the owner). More than
  // one makes the request MLOCK, MUNLOCK or MEXTEND.
  std::vector<std::string> resources;
  std::vector<std::string> tail; // after "--"
  std::string addr;
  std::string timeout;
  std::string secret_file;
  std::string admin_secret_file; // break
  unsigned count = 0;            // list --count; 0: the daemon's default
  bool tls = false;
  std::string cacert, cert, key;
  std::string output = "text";
  std::string ttl, wait, kill_after;
  bool shared = false;        // lock, run: a shared (read) hold
  unsigned permits = 0;       // lock, run: one of this many permits of a semaphore; 0: not one
  int conflict_exit_code = 1; // run: the exit code when the lock is held by someone else
};

// Parses argv without the program name. Options may stand anywhere before "--", each at most
// once; which command takes which is checked too. Throws usage_error, help_requested or
// version_requested.
command_line parse_command_line(const std::vector<std::string>& args);

// The value of a duration option (`flag` names it in the message); throws usage_error.
std::chrono::milliseconds duration_of(const std::string& flag, const std::string& text);

// "a:1,b:2" -> {"a:1", "b:2"}; spaces around an entry are dropped, an empty entry is refused
// with a usage_error naming `where` (the option or variable the list came from).
std::vector<std::string> split_addresses(const std::string& list, const std::string& where);

} // namespace redlockd::ctl
