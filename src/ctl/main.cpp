// redlockctl: the command-line client of redlockd.
#include "redlockd/ctl/duration.hpp"
#include "redlockd/ctl/line_connection.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace redlockd::ctl;
namespace code = redlockd::ctl::exit_code;

constexpr const char* usage =
    R"(usage: redlockctl [OPTIONS] COMMAND ARGS... [OPTIONS]

commands:
  lock RESOURCE --ttl DUR [--wait DUR]   take a lock; prints "<owner> <fence> <validity_ms>"
  unlock RESOURCE OWNER                  release it
  extend RESOURCE OWNER --ttl DUR        extend it; prints the new validity_ms
  status RESOURCE                        "held <ms left>" or "free", read from a majority of
                                         the masters (never the owner)
  info                                   the daemon's state
  ping                                   check that the daemon answers
  run RESOURCE [--ttl DUR] [--wait DUR] [--kill-after DUR] -- CMD [ARGS...]
                                         run CMD while holding a KEEP lock (default --ttl 10s)

Options go anywhere before a "--", as --name VALUE or --name=VALUE, each at most once:
  --addr HOST:PORT[,HOST:PORT...]
                    the daemon; with a list, the next address is tried when one cannot be
                    connected to (default: $REDLOCKD_ADDR, else 127.0.0.1:7400)
  --timeout DUR     connect and reply timeout, WAIT excluded (default 5s)
  --secret-file PATH  send AUTH with the secret in PATH (without its trailing newline) right
                    after connecting (default: $REDLOCKD_CLIENT_SECRET when set, else no AUTH;
                    the old name $REDLOCKD_SECRET still works but is deprecated)
  --tls             connect over TLS (default: on when $REDLOCKD_TLS is 1); the daemon's
                    certificate is verified against --cacert and the host of --addr
  --cacert FILE     CA bundle that signs the daemon's certificate (default: $REDLOCKD_CACERT,
                    else the system's trusted CAs)
  --cert FILE       client certificate, for a daemon that requires one ($REDLOCKD_CERT)
  --key FILE        its private key (default: $REDLOCKD_KEY, else the --cert file)
                    --cacert, --cert and --key imply --tls.
  -o, --output FMT  text (default) or json, for lock, extend, status and info
  --ttl DUR, --wait DUR, --kill-after DUR
                    for the commands above that take them
  --version         print the version
  -h, --help        this text
  DUR is a number with its unit: 250ms, 30s, 5m or 1h.

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
  0    ok (status: held or free)
  1    busy: the lock is held by someone else (BUSY, also after --wait ran out)
  2    no quorum: too few Redis masters reachable (NOQUORUM)
  3    not held (NOTHELD: UNLOCK or EXTEND with an owner that does not hold the lock)
  4    the daemon refused the request (ERR ..., printed to stderr)
  5    cannot reach any daemon, connection lost, or no reply within the timeout
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

// The daemon refused AUTH.
struct auth_refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::chrono::milliseconds duration_of(const std::string& flag, const std::string& text) {
  if (lacks_unit(text))
    throw usage_error(flag + ": '" + text + "' has no unit; write " + text + "ms, " + text + "s, " +
                      text + "m or " + text + "h");
  const auto value = parse_duration(text);
  if (!value)
    throw usage_error(flag + ": bad duration '" + text + "' (e.g. 250ms, 30s, 5m, 1h)");
  return *value;
}

std::string env_or(const char* name, const std::string& fallback = {}) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

// The secret for AUTH: --secret-file wins over $REDLOCKD_CLIENT_SECRET (the daemon's name),
// which wins over the deprecated $REDLOCKD_SECRET; "" when none is given.
std::string client_secret(const std::string& secret_file) {
  std::string secret;
  std::string where;
  const char* current = std::getenv("REDLOCKD_CLIENT_SECRET");
  const char* deprecated = std::getenv("REDLOCKD_SECRET");
  if (!secret_file.empty()) {
    std::ifstream in(secret_file, std::ios::binary);
    std::ostringstream text;
    if (in)
      text << in.rdbuf();
    if (!in || in.bad())
      throw usage_error("--secret-file: cannot read '" + secret_file + "'");
    secret = text.str();
    where = "--secret-file";
  } else if (current != nullptr) {
    secret = current;
    where = "REDLOCKD_CLIENT_SECRET";
    if (deprecated != nullptr)
      std::cerr << "redlockctl: REDLOCKD_SECRET is deprecated and ignored: "
                   "REDLOCKD_CLIENT_SECRET is set\n";
  } else if (deprecated != nullptr) {
    secret = deprecated;
    where = "REDLOCKD_SECRET";
    std::cerr << "redlockctl: REDLOCKD_SECRET is deprecated; set REDLOCKD_CLIENT_SECRET, the "
                 "name the daemon reads too\n";
  } else {
    return {};
  }
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

// Sends AUTH first on a fresh connection; throws auth_refused when the daemon says no.
void authenticate(line_connection& connection, const std::string& secret,
                  std::chrono::milliseconds timeout) {
  if (secret.empty())
    return;
  const std::string reply = connection.request("AUTH " + secret, timeout);
  if (reply != "OK")
    throw auth_refused("authentication refused: " + reply);
}

// "a:1,b:2" -> {"a:1", "b:2"}; spaces around an entry are dropped, an empty entry is refused.
std::vector<std::string> split_addresses(const std::string& list, const std::string& where) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = list.find(',', start);
    std::string entry = list.substr(start, comma == std::string::npos ? comma : comma - start);
    const auto first = entry.find_first_not_of(' ');
    entry = first == std::string::npos
                ? ""
                : entry.substr(first, entry.find_last_not_of(' ') + 1 - first);
    if (entry.empty())
      throw usage_error(where + ": empty address in '" + list + "'");
    out.push_back(entry);
    if (comma == std::string::npos)
      return out;
    start = comma + 1;
  }
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

// The exit code for a reply that is not OK.
int failure(const std::string& reply) {
  std::cerr << "redlockctl: " << reply << "\n";
  if (reply.starts_with("ERR NOAUTH")) {
    std::cerr << "redlockctl: the daemon wants a secret: give --secret-file or set "
                 "REDLOCKD_CLIENT_SECRET\n";
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

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

// A decimal reply field as a JSON number (it is checked, not trusted).
nlohmann::json number(const std::string& word) {
  if (word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
    throw connection_error("unexpected reply field '" + word + "'");
  return std::stoull(word);
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

// Prints a successful reply of `command`.
void print_reply(const std::string& command, const std::string& resource, const std::string& reply,
                 bool json) {
  const std::string body = reply.starts_with("OK ") ? reply.substr(3) : "";
  if (command == "info") {
    if (json)
      std::cout << body << "\n"; // the daemon's own JSON, one line
    else
      print_info(body);
    return;
  }
  if (command == "status") {
    const auto words = words_of(body);
    const bool held = !words.empty() && words[0] == "HELD";
    if (words.empty() || (held ? words.size() != 2 : words.size() != 1 || words[0] != "FREE"))
      throw connection_error("unexpected reply to STATUS: " + reply);
    if (json) {
      nlohmann::json out = {{"resource", resource}, {"state", held ? "held" : "free"}};
      if (held)
        out["pttl_ms"] = number(words[1]);
      std::cout << out.dump() << "\n";
    } else {
      std::cout << (held ? "held " + words[1] : "free") << "\n";
    }
    return;
  }
  if (json && command == "lock") {
    const auto words = words_of(body);
    if (words.size() != 3)
      throw connection_error("unexpected reply to LOCK: " + reply);
    std::cout << nlohmann::json{{"resource", resource},
                                {"owner", words[0]},
                                {"fence", number(words[1])},
                                {"validity_ms", number(words[2])}}
                     .dump()
              << "\n";
    return;
  }
  if (json && command == "extend") {
    const auto words = words_of(body);
    if (words.size() != 1)
      throw connection_error("unexpected reply to EXTEND: " + reply);
    std::cout << nlohmann::json{{"resource", resource}, {"validity_ms", number(words[0])}}.dump()
              << "\n";
    return;
  }
  if (command != "unlock")
    std::cout << (reply.starts_with("OK ") ? body : reply) << "\n";
}

// Everything the command line says, after parsing.
struct command_line {
  std::string command;
  std::vector<std::string> positional;
  std::vector<std::string> tail; // after "--"
  std::string addr;
  std::string timeout;
  std::string secret_file;
  bool tls = false;
  std::string cacert, cert, key;
  std::string output = "text";
  std::string ttl, wait, kill_after;
};

// CLI11's messages, in words that name the option and what is wrong with it.
[[noreturn]] void rethrow_parse_error(const CLI::ParseError& e) {
  const std::string what = e.what();
  const auto colon = what.find(':');
  const std::string name = colon == std::string::npos ? "" : what.substr(0, colon);
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    if (what.find("At Most 1 required") != std::string::npos)
      throw usage_error(name + " given more than once");
    if (what.find("missing") != std::string::npos)
      throw usage_error(name + " needs a value");
  }
  throw usage_error(what);
}

// Parses argv (without the program name) with CLI11. Options are global so that they may stand
// anywhere; which command takes which is checked afterwards.
command_line parse(const std::vector<std::string>& args) {
  command_line line;
  // Everything after the first "--" is run's command, untouched.
  const auto dashes = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> head(args.begin(), dashes);
  if (dashes != args.end())
    line.tail.assign(dashes + 1, args.end());

  CLI::App app{"redlockctl", "redlockctl"};
  app.set_help_flag(); // our own text, below
  app.allow_extras();  // reported below, in our words
  app.require_subcommand(0, 1);
  app.fallthrough();
  auto single = [](CLI::Option* option) {
    return option->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  };
  bool help = false;
  bool version = false;
  std::vector<CLI::Option*> options = {
      single(app.add_flag("-h,--help", help)),
      single(app.add_flag("--version", version)),
      single(app.add_option("--addr", line.addr)),
      single(app.add_option("--timeout", line.timeout)),
      single(app.add_option("--secret-file", line.secret_file)),
      single(app.add_flag("--tls", line.tls)),
      single(app.add_option("--cacert", line.cacert)),
      single(app.add_option("--cert", line.cert)),
      single(app.add_option("--key", line.key)),
      single(app.add_option("-o,--output", line.output)),
      single(app.add_option("--ttl", line.ttl)),
      single(app.add_option("--wait", line.wait)),
      single(app.add_option("--kill-after", line.kill_after)),
  };
  struct command_spec {
    const char* name;
    std::vector<const char*> positionals;
  };
  const std::vector<command_spec> specs = {
      {"lock", {"RESOURCE"}},
      {"unlock", {"RESOURCE", "OWNER"}},
      {"extend", {"RESOURCE", "OWNER"}},
      {"status", {"RESOURCE"}},
      {"info", {}},
      {"ping", {}},
      {"run", {"RESOURCE"}},
  };
  std::vector<std::pair<CLI::App*, std::vector<std::string>>> commands;
  commands.reserve(specs.size());
  for (const auto& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name);
    sub->set_help_flag();
    commands.emplace_back(sub, std::vector<std::string>(spec.positionals.size()));
    for (std::size_t i = 0; i < spec.positionals.size(); ++i)
      sub->add_option(spec.positionals[i], commands.back().second[i]);
  }

  // -h anywhere before "--" wins over every other problem of the line.
  if (std::find_if(head.begin(), head.end(),
                   [](const std::string& a) { return a == "-h" || a == "--help"; }) != head.end())
    throw CLI::CallForHelp();

  std::vector<std::string> reversed(head.rbegin(), head.rend()); // CLI11 wants them backwards
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    rethrow_parse_error(e);
  }
  for (const CLI::Option* option : options)
    if (option->count() > 1)
      throw usage_error(option->get_name() + " given more than once");
  if (version)
    throw CLI::CallForVersion();

  std::size_t index = 0;
  for (; index < commands.size(); ++index)
    if (commands[index].first->parsed())
      break;
  std::vector<std::string> extras = app.remaining();
  if (index == commands.size()) {
    if (extras.empty())
      throw usage_error("no command (one of lock, unlock, extend, status, info, ping, run)");
    if (extras.front().starts_with("-"))
      throw usage_error("unknown option " + extras.front());
    throw usage_error("unknown command '" + extras.front() + "'");
  }
  line.command = specs[index].name;
  for (const auto& extra : commands[index].first->remaining())
    extras.push_back(extra);
  for (const auto& extra : extras)
    if (extra.starts_with("-") && extra.size() > 1)
      throw usage_error("unknown option " + extra.substr(0, extra.find('=')));
  if (!extras.empty())
    throw usage_error(line.command + ": unexpected argument '" + extras.front() + "'");
  const auto& names = specs[index].positionals;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (commands[index].first->count(names[i]) == 0)
      throw usage_error(line.command + ": " + names[i] + " is missing");
    line.positional.push_back(commands[index].second[i]);
  }

  // Options that only some commands take.
  auto only_for = [&](const char* option, std::initializer_list<const char*> takers) {
    if (app.count(option) == 0 || std::find_if(takers.begin(), takers.end(), [&](const char* c) {
                                    return line.command == c;
                                  }) != takers.end())
      return;
    std::string list;
    for (const char* taker : takers)
      list += (list.empty() ? "" : ", ") + std::string(taker);
    throw usage_error(line.command + ": " + option + " does not apply (it is for " + list + ")");
  };
  only_for("--ttl", {"lock", "extend", "run"});
  only_for("--wait", {"lock", "run"});
  only_for("--kill-after", {"run"});
  only_for("--output", {"lock", "extend", "status", "info"});
  if (line.output != "text" && line.output != "json")
    throw usage_error("--output: '" + line.output + "' is not text or json");
  if (line.command == "run" && dashes == args.end())
    throw usage_error("run: give the command after --");
  if (line.command == "run" && line.tail.empty())
    throw usage_error("run: no command after --");
  if (line.command != "run" && dashes != args.end())
    throw usage_error(line.command + ": unexpected '--'");
  if ((line.command == "lock" || line.command == "extend") && app.count("--ttl") == 0)
    throw usage_error(line.command + ": --ttl is required");
  return line;
}

int run(const std::vector<std::string>& args) {
  const command_line line = parse(args);
  const std::vector<std::string> addresses =
      line.addr.empty()
          ? split_addresses(env_or("REDLOCKD_ADDR", "127.0.0.1:7400"), "REDLOCKD_ADDR")
          : split_addresses(line.addr, "--addr");
  const std::chrono::milliseconds timeout =
      line.timeout.empty() ? std::chrono::seconds(5) : duration_of("--timeout", line.timeout);
  if (timeout.count() <= 0)
    throw usage_error("--timeout must be more than 0");
  tls_options tls_files{line.cacert.empty() ? env_or("REDLOCKD_CACERT") : line.cacert,
                        line.cert.empty() ? env_or("REDLOCKD_CERT") : line.cert,
                        line.key.empty() ? env_or("REDLOCKD_KEY") : line.key};
  const bool use_tls = line.tls || !line.cacert.empty() || !line.cert.empty() ||
                       !line.key.empty() || env_or("REDLOCKD_TLS") == "1";
  if (use_tls && !tls_files.key_file.empty() && tls_files.cert_file.empty())
    throw usage_error("--key needs --cert");
  const std::optional<tls_options> tls =
      use_tls ? std::optional<tls_options>(tls_files) : std::nullopt;
  const bool json = line.output == "json";
  const std::string& command = line.command;

  // A resource with a space or a control byte would split the request line: refuse it here.
  const auto& positional = line.positional;
  if (!positional.empty() &&
      (positional[0].empty() || positional[0].find_first_of(" \t\r\n") != std::string::npos))
    throw usage_error("the resource must be printable and contain no spaces");

  if (command == "run") {
    run_options options;
    options.resource = positional[0];
    options.command = line.tail;
    options.timeout = timeout;
    if (!line.ttl.empty())
      options.ttl = duration_of("--ttl", line.ttl);
    if (!line.wait.empty())
      options.wait = duration_of("--wait", line.wait);
    if (!line.kill_after.empty())
      options.kill_after = duration_of("--kill-after", line.kill_after);
    const std::string secret = client_secret(line.secret_file);
    try {
      const auto connection = connect_any(addresses, timeout, tls, secret);
      return run_under_lock(*connection, options);
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
    request = "LOCK " + positional[0] + " " + ms(duration_of("--ttl", line.ttl));
    if (!line.wait.empty()) {
      wait = duration_of("--wait", line.wait);
      request += " WAIT " + ms(wait);
    }
  } else if (command == "unlock") {
    request = "UNLOCK " + positional[0] + " " + positional[1];
  } else if (command == "extend") {
    request =
        "EXTEND " + positional[0] + " " + positional[1] + " " + ms(duration_of("--ttl", line.ttl));
  } else if (command == "status") {
    request = "STATUS " + positional[0];
  } else if (command == "info") {
    request = "INFO";
  } else {
    request = "PING";
  }
  const std::string secret = client_secret(line.secret_file);

  try {
    const auto connection = connect_any(addresses, timeout, tls, secret);
    const std::string reply = connection->request(request, wait + timeout);
    if (!(reply == "OK" || reply.starts_with("OK ") || reply.starts_with("PONG")))
      return failure(reply);
    print_reply(command, positional.empty() ? "" : positional[0], reply, json);
    connection->request("QUIT", timeout);
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
  } catch (const CLI::CallForHelp&) {
    std::cout << usage;
    return code::ok;
  } catch (const CLI::CallForVersion&) {
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
