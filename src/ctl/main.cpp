// redlockctl, the command-line client of redlockd: reading the connection settings, connecting
// with failover to the next address, AUTH, sending the command (or `run`), and main().
#include "redlockd/ctl/command_line.hpp"
#include "redlockd/ctl/line_connection.hpp"
#include "redlockd/ctl/long_wait.hpp"
#include "redlockd/ctl/output.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace redlockd::ctl;
namespace code = redlockd::ctl::exit_code;

// The daemon refused AUTH.
struct auth_refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string env_or(const char* name, const std::string& fallback = {}) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

// A secret file's content; `option` names it in the usage_error when it cannot be read.
std::string read_secret_file(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in)
    text << in.rdbuf();
  if (!in || in.bad())
    throw usage_error(option + ": cannot read '" + path + "'");
  return text.str();
}

// `secret` without its trailing newline; empty, or what would split the AUTH line, is a
// usage_error naming `where` it came from.
std::string checked_secret(std::string secret, const std::string& where) {
  if (secret.ends_with('\n'))
    secret.pop_back();
  if (secret.ends_with('\r'))
    secret.pop_back();
  if (secret.empty())
    throw usage_error(where + ": the secret is empty");
  // One AUTH line: a space or a control byte would split it.
  if (std::any_of(secret.begin(), secret.end(), [](char c) { return c < 0x21 || c > 0x7e; }))
    throw usage_error(where + ": the secret must be printable ASCII without spaces");
  return secret;
}

// The secret for AUTH: --secret-file wins over $REDLOCKD_CLIENT_SECRET (the daemon's name),
// which wins over the deprecated $REDLOCKD_SECRET; "" when none is given.
std::string client_secret(const std::string& secret_file) {
  const char* current = std::getenv("REDLOCKD_CLIENT_SECRET");
  const char* deprecated = std::getenv("REDLOCKD_SECRET");
  if (!secret_file.empty())
    return checked_secret(read_secret_file(secret_file, "--secret-file"), "--secret-file");
  if (current != nullptr) {
    if (deprecated != nullptr)
      std::cerr << "redlockctl: REDLOCKD_SECRET is deprecated and ignored: "
                   "REDLOCKD_CLIENT_SECRET is set\n";
    return checked_secret(current, "REDLOCKD_CLIENT_SECRET");
  }
  if (deprecated != nullptr) {
    std::cerr << "redlockctl: REDLOCKD_SECRET is deprecated; set REDLOCKD_CLIENT_SECRET, the "
                 "name the daemon reads too\n";
    return checked_secret(deprecated, "REDLOCKD_SECRET");
  }
  return {};
}

// break's secret: --admin-secret-file wins over $REDLOCKD_ADMIN_SECRET (the daemon's name); one
// of them is required. It authenticates as a client too.
std::string admin_secret(const std::string& secret_file) {
  if (!secret_file.empty())
    return checked_secret(read_secret_file(secret_file, "--admin-secret-file"),
                          "--admin-secret-file");
  if (const char* from_env = std::getenv("REDLOCKD_ADMIN_SECRET"))
    return checked_secret(from_env, "REDLOCKD_ADMIN_SECRET");
  throw usage_error("break: give the admin secret with --admin-secret-file or "
                    "REDLOCKD_ADMIN_SECRET");
}

// Sends AUTH first on a fresh connection; throws auth_refused when the daemon says no.
void authenticate(line_connection& connection, const std::string& secret,
                  std::chrono::milliseconds timeout) {
  if (secret.empty())
    return;
  const std::string reply = connection.request("AUTH " + secret, timeout);
  if (reply != "OK")
    throw auth_refused("authentication refused: " + reply);
}

// Connects to the first address that answers (connection and TLS handshake, then AUTH). Only a
// failure to connect moves on to the next address: once a request was sent it is never repeated
// elsewhere, since the first daemon may have carried it out. Throws connection_error naming every
// address tried, or auth_refused.
std::unique_ptr<line_connection> connect_any(const std::vector<std::string>& addresses,
                                             std::chrono::milliseconds timeout,
                                             const std::optional<tls_options>& tls,
                                             const std::string& secret) {
  std::string failures;
  for (const auto& address : addresses) {
    try {
      auto connection = std::make_unique<line_connection>(address, timeout, tls);
      authenticate(*connection, secret, timeout);
      return connection;
    } catch (const connection_error& e) {
      if (addresses.size() > 1)
        std::cerr << "redlockctl: " << e.what()
                  << (&address != &addresses.back() ? "; trying the next address" : "") << "\n";
      failures += (failures.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  if (addresses.size() > 1)
    throw connection_error("no daemon reachable at " + std::to_string(addresses.size()) +
                           " addresses");
  throw connection_error(failures);
}

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

// Where and how to connect, from the options and the environment.
struct connection_settings {
  std::vector<std::string> addresses;
  std::chrono::milliseconds timeout;
  std::optional<tls_options> tls;
};

connection_settings connection_settings_of(const command_line& line) {
  connection_settings settings;
  settings.addresses =
      line.addr.empty()
          ? split_addresses(env_or("REDLOCKD_ADDR", "127.0.0.1:7400"), "REDLOCKD_ADDR")
          : split_addresses(line.addr, "--addr");
  settings.timeout =
      line.timeout.empty() ? std::chrono::seconds(5) : duration_of("--timeout", line.timeout);
  if (settings.timeout.count() <= 0)
    throw usage_error("--timeout must be more than 0");
  tls_options tls_files{line.cacert.empty() ? env_or("REDLOCKD_CACERT") : line.cacert,
                        line.cert.empty() ? env_or("REDLOCKD_CERT") : line.cert,
                        line.key.empty() ? env_or("REDLOCKD_KEY") : line.key};
  const bool use_tls = line.tls || !line.cacert.empty() || !line.cert.empty() ||
                       !line.key.empty() || env_or("REDLOCKD_TLS") == "1";
  if (use_tls && !tls_files.key_file.empty() && tls_files.cert_file.empty())
    throw usage_error("--key needs --cert");
  if (use_tls)
    settings.tls = tls_files;
  return settings;
}

// `redlockctl run`: the lock's connection stays open while the command runs.
int run_command(const command_line& line, const connection_settings& settings) {
  run_options options;
  options.resource = line.resources.front();
  options.resources = line.resources;
  options.shared = line.shared;
  options.permits = line.permits;
  options.command = line.tail;
  options.timeout = settings.timeout;
  if (!line.ttl.empty())
    options.ttl = duration_of("--ttl", line.ttl);
  if (!line.wait.empty())
    options.wait = duration_of("--wait", line.wait);
  if (!line.kill_after.empty())
    options.kill_after = duration_of("--kill-after", line.kill_after);
  options.conflict_exit_code = line.conflict_exit_code;
  options.json = line.output == "json";
  const std::string secret = client_secret(line.secret_file);
  try {
    const auto connection = connect_any(settings.addresses, settings.timeout, settings.tls, secret);
    return run_under_lock(*connection, options);
  } catch (const auth_refused& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::auth_failed;
  } catch (const connection_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::run_failed;
  }
}

// A request line; for LOCK with --wait, the wait (sent by lock_with_wait, as long as asked) and
// the TTL.
struct daemon_request {
  std::string line;
  std::optional<std::chrono::milliseconds> wait;
  std::chrono::milliseconds ttl{0};
};

// A request without a wait.
daemon_request plain(std::string line) {
  daemon_request request;
  request.line = std::move(line);
  return request;
}

// The request for every command but run.
daemon_request request_for(const command_line& line) {
  const auto& positional = line.positional;
  const std::string& command = line.command;
  if (command == "lock") {
    daemon_request request;
    request.ttl = duration_of("--ttl", line.ttl);
    request.line = lock_request_line(line.resources, request.ttl, line.shared, line.permits);
    if (!line.wait.empty())
      request.wait = duration_of("--wait", line.wait);
    return request;
  }
  // unlock and extend: the resources (several: MUNLOCK, MEXTEND), then the owner.
  if (command == "unlock")
    return plain(resources_request_prefix("UNLOCK", line.resources) + " " + positional.back());
  if (command == "extend")
    return plain(resources_request_prefix("EXTEND", line.resources) + " " + positional.back() +
                 " " + ms(duration_of("--ttl", line.ttl)));
  if (command == "status")
    return plain("STATUS " + positional[0]);
  if (command == "list") {
    std::string request = "LIST";
    if (!positional.empty())
      request += " " + positional[0];
    if (line.count != 0)
      request += " COUNT " + std::to_string(line.count);
    return plain(request);
  }
  if (command == "break")
    return plain("BREAK " + positional[0]);
  if (command == "info")
    return plain("INFO");
  return plain("PING");
}

// One request (LOCK ... WAIT: as many as the wait takes), its reply printed; then QUIT.
int send_command(const command_line& line, const connection_settings& settings) {
  const daemon_request request = request_for(line);
  const std::string secret = line.command == "break" ? admin_secret(line.admin_secret_file)
                                                     : client_secret(line.secret_file);
  try {
    const auto connection = connect_any(settings.addresses, settings.timeout, settings.tls, secret);
    const std::string reply = request.wait
                                  ? lock_with_wait(*connection, request.line, "", *request.wait,
                                                   request.ttl, settings.timeout)
                                  : connection->request(request.line, settings.timeout);
    if (!is_success_reply(reply))
      return report_failure(std::cerr, reply);
    print_reply(std::cout, line.command, line.positional.empty() ? "" : line.positional[0], reply,
                line.output == "json", line.resources);
    connection->request("QUIT", settings.timeout);
    return code::ok;
  } catch (const auth_refused& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::auth_failed;
  } catch (const connection_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::unreachable;
  }
}

int run(const std::vector<std::string>& args) {
  const command_line line = parse_command_line(args);
  const connection_settings settings = connection_settings_of(line);
  // A resource with a space or a control byte would split the request line: refuse it here.
  for (const auto& word : line.positional)
    if (word.empty() || word.find_first_of(" \t\r\n") != std::string::npos)
      throw usage_error("the resource must be printable and contain no spaces");
  return line.command == "run" ? run_command(line, settings) : send_command(line, settings);
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const help_requested&) {
    std::cout << usage_text;
    return code::ok;
  } catch (const version_requested&) {
    std::cout << "redlockctl " << REDLOCKD_VERSION << "\n";
    return code::ok;
  } catch (const usage_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n(see redlockctl --help)\n";
    return code::usage;
  } catch (const std::exception& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::unreachable;
  }
}
