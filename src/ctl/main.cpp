// redlockctl: the command-line client of redlockd.
#include "redlockd/ctl/duration.hpp"
#include "redlockd/ctl/line_connection.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace redlockd::ctl;
namespace code = redlockd::ctl::exit_code;

constexpr const char* usage =
    R"(usage: redlockctl [--addr HOST:PORT] [--timeout DUR] [--secret-file PATH]
                  [--tls [--cacert FILE] [--cert FILE --key FILE]] COMMAND ...

commands:
  lock RESOURCE --ttl DUR [--wait DUR]   take a lock; prints "<owner> <fence> <validity_ms>"
  unlock RESOURCE OWNER                  release it
  extend RESOURCE OWNER --ttl DUR        extend it; prints the new validity_ms
  info                                   the daemon's state
  ping                                   check that the daemon answers
  run RESOURCE [--ttl DUR] [--wait DUR] [--kill-after DUR] -- CMD [ARGS...]
                                         run CMD while holding a KEEP lock (default --ttl 10s)

  --addr HOST:PORT  the daemon (default: $REDLOCKD_ADDR, else 127.0.0.1:7400)
  --timeout DUR     connect and reply timeout, WAIT excluded (default 5s)
  --secret-file PATH  send AUTH with the secret in PATH (without its trailing newline) right
                    after connecting (default: $REDLOCKD_SECRET when set, else no AUTH)
  --tls             connect over TLS (default: on when $REDLOCKD_TLS is 1); the daemon's
                    certificate is verified against --cacert and the host of --addr
  --cacert FILE     CA bundle that signs the daemon's certificate (default: $REDLOCKD_CACERT,
                    else the system's trusted CAs)
  --cert FILE       client certificate, for a daemon that requires one ($REDLOCKD_CERT)
  --key FILE        its private key (default: $REDLOCKD_KEY, else the --cert file)
                    --cacert, --cert and --key imply --tls.
  DUR is 250ms, 30s, 5m, 1h or plain milliseconds.

run: the command runs directly (no shell) in its own process group, with REDLOCK_RESOURCE,
REDLOCK_OWNER, REDLOCK_FENCE and REDLOCK_VALIDITY_MS set. redlockctl keeps the lock's connection
open and PINGs the daemon every TTL/8. If the lock is lost (LOST pushed, the connection breaks,
or a PING goes unanswered for TTL/4), the whole group gets SIGTERM at once and SIGKILL after
--kill-after (default TTL/4 - TTL/100 - 2ms: before the validity the daemon still guarantees
runs out; a longer --kill-after lets the command outlive its lock). Signals INT, TERM and HUP
sent to redlockctl are passed on to the group. When the command exits, anything it left in its
group is stopped the same way, then the lock is released. If redlockctl itself is killed, the
command gets SIGKILL.

exit codes:
  0    ok
  1    busy: the lock is held by someone else (BUSY, also after --wait ran out)
  2    no quorum: too few Redis masters reachable (NOQUORUM)
  3    not held (NOTHELD: UNLOCK or EXTEND with an owner that does not hold the lock)
  4    the daemon refused the request (ERR ..., printed to stderr)
  5    cannot reach the daemon, connection lost, or no reply within the timeout
  6    authentication failed: AUTH refused (ERR AUTH_FAILED), or the daemon wants a secret and
       none was given (ERR NOAUTH)
  64   bad usage
 run:  the command's exit code, 128+N if a signal N ended it (143 SIGTERM, 137 SIGKILL after
       the lock was lost); 1 busy, 2 no quorum, 6 authentication failed, 125 any other failure
       before the command ran, 126 command not executable, 127 command not found.
)";

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::chrono::milliseconds duration_of(const std::string& flag, const std::string& text) {
  const auto value = parse_duration(text);
  if (!value)
    throw usage_error(flag + ": bad duration '" + text + "' (e.g. 250ms, 30s, 5m)");
  return *value;
}

// The daemon refused AUTH.
struct auth_refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The secret for AUTH: --secret-file wins over $REDLOCKD_SECRET; "" when neither is given.
std::string client_secret(const std::string& secret_file) {
  std::string secret;
  if (!secret_file.empty()) {
    std::ifstream in(secret_file, std::ios::binary);
    std::ostringstream text;
    if (in)
      text << in.rdbuf();
    if (!in || in.bad())
      throw usage_error("--secret-file: cannot read '" + secret_file + "'");
    secret = text.str();
  } else if (const char* env = std::getenv("REDLOCKD_SECRET")) {
    secret = env;
  } else {
    return {};
  }
  if (secret.ends_with('\n'))
    secret.pop_back();
  if (secret.ends_with('\r'))
    secret.pop_back();
  const std::string where = secret_file.empty() ? "REDLOCKD_SECRET" : "--secret-file";
  if (secret.empty())
    throw usage_error(where + ": the secret is empty");
  // One AUTH line: a space or a control byte would split it.
  if (std::any_of(secret.begin(), secret.end(), [](char c) { return c < 0x21 || c > 0x7e; }))
    throw usage_error(where + ": the secret must be printable ASCII without spaces");
  return secret;
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

// The exit code for a reply that is not OK.
int failure(const std::string& reply) {
  std::cerr << "redlockctl: " << reply << "\n";
  if (reply.starts_with("ERR NOAUTH")) {
    std::cerr << "redlockctl: the daemon wants a secret: give --secret-file or set "
                 "REDLOCKD_SECRET\n";
    return code::auth_failed;
  }
  if (reply.starts_with("BUSY"))
    return code::busy;
  if (reply.starts_with("NOQUORUM"))
    return code::no_quorum;
  if (reply.starts_with("NOTHELD"))
    return code::not_held;
  return code::refused;
}

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

// A readable INFO: fields the daemon does not send are left out.
void print_info(const std::string& json_text) {
  const auto info = nlohmann::json::parse(json_text, nullptr, false);
  if (info.is_discarded() || !info.is_object()) {
    std::cout << json_text << "\n";
    return;
  }
  auto text = [](const nlohmann::json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  auto line = [&](std::initializer_list<std::pair<const char*, const char*>> fields) {
    std::string out;
    for (const auto& [key, label] : fields)
      if (info.contains(key))
        out += (out.empty() ? "" : ", ") + std::string(label) + text(info[key]);
    if (!out.empty())
      std::cout << out << "\n";
  };
  std::cout << "redlockd" << (info.contains("version") ? " " + text(info["version"]) : "") << "\n";
  if (info.contains("uptime_s"))
    std::cout << "up " << text(info["uptime_s"]) << " s" << (info.contains("quorum") ? ", " : "\n");
  line({{"quorum", "quorum "}});
  if (info.contains("nodes") && info["nodes"].is_array()) {
    std::cout << "nodes:\n";
    for (const auto& node : info["nodes"]) {
      if (!node.is_object())
        continue;
      std::cout << "  " << (node.contains("address") ? text(node["address"]) : "?");
      if (node.contains("state"))
        std::cout << "  " << text(node["state"]);
      if (node.contains("rtt_us") && node["rtt_us"].is_number() && node["rtt_us"] >= 0)
        std::cout << "  rtt " << text(node["rtt_us"]) << " us";
      if (node.contains("quarantined_ms") && node["quarantined_ms"].is_number() &&
          node["quarantined_ms"] > 0)
        std::cout << "  quarantined " << text(node["quarantined_ms"]) << " ms more";
      std::cout << "\n";
    }
  }
  line({{"clients", "clients "},
        {"waiters", "waiters "},
        {"keep_locks", "keep locks "},
        {"operations_in_flight", "in flight "}});
  line({{"fence_high_water", "fence high water "}, {"max_ttl_granted", "max ttl granted ms "}});
  if (info.contains("counters") && info["counters"].is_object()) {
    std::cout << "counters:";
    for (const auto& [name, value] : info["counters"].items())
      std::cout << " " << name << "=" << text(value);
    std::cout << "\n";
  }
}

int run(std::vector<std::string> args) {
  std::string address =
      std::getenv("REDLOCKD_ADDR") ? std::getenv("REDLOCKD_ADDR") : "127.0.0.1:7400";
  std::chrono::milliseconds timeout = std::chrono::seconds(5);
  std::string secret_file;
  auto env = [](const char* name) { return std::getenv(name) ? std::getenv(name) : ""; };
  bool use_tls = std::string(env("REDLOCKD_TLS")) == "1";
  tls_options tls_files{env("REDLOCKD_CACERT"), env("REDLOCKD_CERT"), env("REDLOCKD_KEY")};
  std::size_t i = 0;
  for (; i < args.size() && args[i].starts_with("--"); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << usage;
      return code::ok;
    }
    if (args[i] == "--tls") {
      use_tls = true;
      continue;
    }
    if (i + 1 >= args.size())
      throw usage_error(args[i] + " needs a value");
    if (args[i] == "--addr")
      address = args[++i];
    else if (args[i] == "--timeout")
      timeout = duration_of("--timeout", args[++i]);
    else if (args[i] == "--secret-file")
      secret_file = args[++i];
    else if (args[i] == "--cacert" || args[i] == "--cert" || args[i] == "--key") {
      use_tls = true;
      (args[i] == "--cacert" ? tls_files.ca_file
       : args[i] == "--cert" ? tls_files.cert_file
                             : tls_files.key_file) = args[i + 1];
      ++i;
    } else
      throw usage_error("unknown option " + args[i]);
  }
  if (use_tls && !tls_files.key_file.empty() && tls_files.cert_file.empty())
    throw usage_error("--key needs --cert");
  const std::optional<tls_options> tls =
      use_tls ? std::optional<tls_options>(tls_files) : std::nullopt;
  if (timeout.count() <= 0)
    throw usage_error("--timeout must be more than 0");
  if (i == args.size())
    throw usage_error("no command");
  const std::string secret = client_secret(secret_file);
  const std::string command = args[i++];

  // The command's own arguments: positionals and --flag VALUE pairs, up to a "--".
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  std::vector<std::string> tail;
  for (; i < args.size(); ++i) {
    if (args[i] == "--") {
      tail.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << usage;
      return code::ok;
    }
    if (args[i].starts_with("--")) {
      if (i + 1 >= args.size())
        throw usage_error(args[i] + " needs a value");
      flags[args[i]] = args[i + 1];
      ++i;
    } else {
      positional.push_back(args[i]);
    }
  }
  auto allow = [&](std::initializer_list<const char*> known, std::size_t positionals) {
    for (const auto& [flag, value] : flags)
      if (std::find(known.begin(), known.end(), flag) == known.end())
        throw usage_error(command + ": unknown option " + flag);
    if (positional.size() != positionals)
      throw usage_error(command + ": expected " + std::to_string(positionals) + " argument(s)");
    if (!tail.empty() && command != "run")
      throw usage_error(command + ": unexpected '--'");
  };

  // A resource with a space or a control byte would split the request line: refuse it here.
  if (!positional.empty() &&
      (positional[0].empty() || positional[0].find_first_of(" \t\r\n") != std::string::npos))
    throw usage_error("the resource must be printable and contain no spaces");

  if (command == "run") {
    allow({"--ttl", "--wait", "--kill-after"}, 1);
    if (tail.empty())
      throw usage_error("run: give the command after --");
    run_options options;
    options.resource = positional[0];
    options.command = tail;
    options.timeout = timeout;
    if (flags.count("--ttl"))
      options.ttl = duration_of("--ttl", flags["--ttl"]);
    if (flags.count("--wait"))
      options.wait = duration_of("--wait", flags["--wait"]);
    if (flags.count("--kill-after"))
      options.kill_after = duration_of("--kill-after", flags["--kill-after"]);
    try {
      line_connection connection(address, timeout, tls);
      authenticate(connection, secret, timeout);
      return run_under_lock(connection, options);
    } catch (const auth_refused& e) {
      std::cerr << "redlockctl: " << e.what() << "\n";
      return code::auth_failed;
    } catch (const connection_error& e) {
      std::cerr << "redlockctl: " << e.what() << "\n";
      return code::run_failed;
    }
  }

  std::string request;
  auto wait = std::chrono::milliseconds(0);
  if (command == "lock") {
    allow({"--ttl", "--wait"}, 1);
    if (!flags.count("--ttl"))
      throw usage_error("lock: --ttl is required");
    request = "LOCK " + positional[0] + " " + ms(duration_of("--ttl", flags["--ttl"]));
    if (flags.count("--wait")) {
      wait = duration_of("--wait", flags["--wait"]);
      request += " WAIT " + ms(wait);
    }
  } else if (command == "unlock") {
    allow({}, 2);
    request = "UNLOCK " + positional[0] + " " + positional[1];
  } else if (command == "extend") {
    allow({"--ttl"}, 2);
    if (!flags.count("--ttl"))
      throw usage_error("extend: --ttl is required");
    request = "EXTEND " + positional[0] + " " + positional[1] + " " +
              ms(duration_of("--ttl", flags["--ttl"]));
  } else if (command == "info") {
    allow({}, 0);
    request = "INFO";
  } else if (command == "ping") {
    allow({}, 0);
    request = "PING";
  } else {
    throw usage_error("unknown command '" + command + "'");
  }

  try {
    line_connection connection(address, timeout, tls);
    authenticate(connection, secret, timeout);
    const std::string reply = connection.request(request, wait + timeout);
    if (!(reply == "OK" || reply.starts_with("OK ") || reply.starts_with("PONG")))
      return failure(reply);
    if (command == "info")
      print_info(reply.substr(3));
    else if (command != "unlock")
      std::cout << (reply.starts_with("OK ") ? reply.substr(3) : reply) << "\n";
    connection.request("QUIT", timeout);
    return code::ok;
  } catch (const auth_refused& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::auth_failed;
  } catch (const connection_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::unreachable;
  }
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const usage_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n(see redlockctl --help)\n";
    return code::usage;
  } catch (const std::exception& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return code::unreachable;
  }
}
