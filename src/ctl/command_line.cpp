// redlockctl's command line: the usage text, CLI11 declaring the options and commands, and the
// checks after parsing (which command takes which option, what each one requires).
#include "redlockd/ctl/command_line.hpp"

#include "redlockd/ctl/duration.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <initializer_list>

namespace redlockd::ctl {

const char* const usage_text =
    R"(usage: redlockctl [OPTIONS] COMMAND ARGS... [OPTIONS]

commands:
  lock RESOURCE... --ttl DUR [--wait DUR] [--shared | --permits N]
                                         take a lock; prints "<owner> <fence> <validity_ms>";
                                         several resources: all of them or none (MLOCK)
  unlock RESOURCE... OWNER               release it (a set: MUNLOCK of those named)
  extend RESOURCE... OWNER --ttl DUR     extend it; prints the new validity_ms
  status RESOURCE                        "held <ms left>" or "free", read from a majority of
                                         the masters (never the owner), then "readers=<k>",
                                         "permits=<used>/<n>" and "label=<label>" when the
                                         daemon says them
  list [PREFIX] [--count N]              the resources held on a majority of the masters (by
                                         any daemon), one per line: resource, kind, ms left,
                                         labels; at most N (default 100, at most 1000)
  break RESOURCE                         end every hold of RESOURCE whatever its owner (needs
                                         the admin secret: --admin-secret-file or
                                         $REDLOCKD_ADMIN_SECRET)
  info                                   the daemon's state
  ping                                   check that the daemon answers
  run RESOURCE... [--ttl DUR] [--wait DUR] [--shared | --permits N] [--kill-after DUR]
      [--conflict-exit-code N] -- CMD [ARGS...]
                                         run CMD while holding a KEEP lock (default --ttl 10s);
                                         the resources are the words before --, CMD those after

Options go anywhere before a "--", as --name VALUE or --name=VALUE, each at most once:
  --addr HOST:PORT[,HOST:PORT...]
                    the daemon; with a list, the next address is tried when one cannot be
                    connected to (default: $REDLOCKD_ADDR, else 127.0.0.1:7400); unix:PATH
                    is the daemon's Unix socket (listen_unix), plaintext
  --timeout DUR     connect and reply timeout, WAIT excluded (default 5s)
  --secret-file PATH  send AUTH with the secret in PATH (without its trailing newline) right
                    after connecting (default: $REDLOCKD_CLIENT_SECRET when set, else no AUTH;
                    the old name $REDLOCKD_SECRET still works but is deprecated)
  --admin-secret-file PATH
                    break: AUTH with the admin secret in PATH instead (default:
                    $REDLOCKD_ADMIN_SECRET)
  --count N         list: at most N resources
  --tls             connect over TLS (default: on when $REDLOCKD_TLS is 1); the daemon's
                    certificate is verified against --cacert and the host of --addr
  --cacert FILE     CA bundle that signs the daemon's certificate (default: $REDLOCKD_CACERT,
                    else the system's trusted CAs)
  --cert FILE       client certificate, for a daemon that requires one ($REDLOCKD_CERT)
  --key FILE        its private key (default: $REDLOCKD_KEY, else the --cert file)
                    --cacert, --cert and --key imply --tls.
  -o, --output FMT  text (default) or json: one JSON object per command (run: after CMD
                    ended, {"resource","fence","exit_code","lost"})
  --ttl DUR, --wait DUR, --kill-after DUR
                    for the commands above that take them; a --wait longer than the daemon's
                    max_ttl_ms is waited for in several LOCK ... WAIT requests
  --shared          lock, run: a shared (read) hold: any number of them at once, none while
                    an exclusive lock is held or a writer waits (one resource)
  --permits N       lock, run: one of N permits of the semaphore RESOURCE (one resource;
                    every holder names the same N)
  --conflict-exit-code N
                    run: exit with N (0-255) instead of 1 when the lock is held by someone
                    else, as flock -E does, to tell it from CMD's own exit 1
  --version         print the version
  -h, --help        this text
  DUR is numbers with units, largest first: 250ms, 1.5s, 1m30s, 2h (whole milliseconds).

run: the command runs directly (no shell) in its own process group, with REDLOCK_RESOURCE (the
first resource), REDLOCK_RESOURCES (all of them, space-separated), REDLOCK_OWNER, REDLOCK_FENCE
and REDLOCK_VALIDITY_MS set. redlockctl keeps the lock's connection
open and PINGs the daemon every TTL/8. If the lock is lost (LOST pushed, the connection breaks,
or a PING goes unanswered for TTL/4), the whole group gets SIGTERM at once and SIGKILL after
--kill-after (default TTL/4 - TTL/100 - 2ms: before the validity the daemon still guarantees
runs out; a longer --kill-after lets the command outlive its lock). Signals INT, TERM and HUP
sent to redlockctl are passed on to the group. When the command exits, anything it left in its
group is stopped the same way, then the lock is released. If redlockctl itself is killed, the
command gets SIGKILL.

exit codes:
  0    ok (status: held or free; list: whatever it lists)
  1    busy: the lock is held by someone else (BUSY, also after --wait ran out)
  2    no quorum: too few Redis masters reachable (NOQUORUM)
  3    not held (NOTHELD: UNLOCK or EXTEND with an owner that does not hold the lock, BREAK
       of a resource nobody holds)
  4    the daemon refused the request (ERR ..., printed to stderr)
  5    cannot reach any daemon, connection lost, or no reply within the timeout
  6    authentication failed: AUTH refused (ERR AUTH_FAILED), or the daemon wants a secret and
       none was given (ERR NOAUTH)
  64   bad usage
 run:  the command's exit code, 128+N if a signal N ended it (143 SIGTERM, 137 SIGKILL after
       the lock was lost); 1 (or --conflict-exit-code) busy, 2 no quorum, 6 authentication
       failed, 125 any other failure before the command ran, 126 command not executable, 127
       command not found.
)";

namespace {

struct command_spec {
  const char* name;
  std::vector<const char*> positionals;
  std::size_t required = positionals.size(); // the ones after these may be left out
  bool several = false; // RESOURCE may be given more than once (the first positional)
};

const std::vector<command_spec> command_specs = {
    {"lock", {"RESOURCE"}, 1, true},
    {"unlock", {"RESOURCE", "OWNER"}, 2, true},
    {"extend", {"RESOURCE", "OWNER"}, 2, true},
    {"status", {"RESOURCE"}},
    {"list", {"PREFIX"}, 0},
    {"break", {"RESOURCE"}},
    {"info", {}},
    {"ping", {}},
    {"run", {"RESOURCE"}, 1, true},
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

// The CLI11 app that reads redlockctl's options and commands into a command_line. Options are
// global so that they may stand anywhere; which command takes which is checked after parsing.
struct cli_grammar {
  explicit cli_grammar(command_line& line);
  cli_grammar(const cli_grammar&) = delete;
  cli_grammar& operator=(const cli_grammar&) = delete;

  CLI::App app{"redlockctl", "redlockctl"};
  bool help = false;
  bool version = false;
  std::string conflict_exit_code;    // checked by check_options_fit
  std::string count;                 // likewise
  std::string permits;               // likewise
  std::vector<CLI::Option*> options; // every option, each allowed at most once
  // Per entry of command_specs: its subcommand and the values of its positionals.
  std::vector<std::pair<CLI::App*, std::vector<std::string>>> commands;
};

cli_grammar::cli_grammar(command_line& line) {
  app.set_help_flag(); // our own text, usage_text
  app.allow_extras();  // reported by take_command, in our words
  app.require_subcommand(0, 1);
  app.fallthrough();
  auto single = [](CLI::Option* option) {
    return option->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  };
  options = {
      single(app.add_flag("-h,--help", help)),
      single(app.add_flag("--version", version)),
      single(app.add_option("--addr", line.addr)),
      single(app.add_option("--timeout", line.timeout)),
      single(app.add_option("--secret-file", line.secret_file)),
      single(app.add_option("--admin-secret-file", line.admin_secret_file)),
      single(app.add_option("--count", count)),
      single(app.add_flag("--tls", line.tls)),
      single(app.add_option("--cacert", line.cacert)),
      single(app.add_option("--cert", line.cert)),
      single(app.add_option("--key", line.key)),
      single(app.add_option("-o,--output", line.output)),
      single(app.add_option("--ttl", line.ttl)),
      single(app.add_option("--wait", line.wait)),
      single(app.add_option("--kill-after", line.kill_after)),
      single(app.add_option("--conflict-exit-code", conflict_exit_code)),
      single(app.add_flag("--shared", line.shared)),
      single(app.add_option("--permits", permits)),
  };
  commands.reserve(command_specs.size()); // the positionals are bound by address
  for (const auto& spec : command_specs) {
    CLI::App* sub = app.add_subcommand(spec.name);
    sub->set_help_flag();
    if (spec.several) {
      // One list takes every positional word, options in between or not; counted afterwards.
      commands.emplace_back(sub, std::vector<std::string>());
      sub->add_option(spec.positionals[0], commands.back().second);
      continue;
    }
    commands.emplace_back(sub, std::vector<std::string>(spec.positionals.size()));
    for (std::size_t i = 0; i < spec.positionals.size(); ++i)
      sub->add_option(spec.positionals[i], commands.back().second[i]);
  }
}

// Runs CLI11 on the arguments before "--"; an option given twice is a usage_error.
void parse_options(cli_grammar& grammar, const std::vector<std::string>& head) {
  std::vector<std::string> reversed(head.rbegin(), head.rend()); // CLI11 wants them backwards
  try {
    grammar.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    rethrow_parse_error(e);
  }
  for (const CLI::Option* option : grammar.options)
    if (option->count() > 1)
      throw usage_error(option->get_name() + " given more than once");
}

// Sets line.command and line.positional; no command, a missing positional, or anything left over
// is a usage_error.
void take_command(const cli_grammar& grammar, command_line& line) {
  const auto& commands = grammar.commands;
  std::size_t index = 0;
  for (; index < commands.size(); ++index)
    if (commands[index].first->parsed())
      break;
  std::vector<std::string> extras = grammar.app.remaining();
  if (index == commands.size()) {
    if (extras.empty())
      throw usage_error(
          "no command (one of lock, unlock, extend, status, list, break, info, ping, run)");
    if (extras.front().starts_with("-"))
      throw usage_error("unknown option " + extras.front());
    throw usage_error("unknown command '" + extras.front() + "'");
  }
  line.command = command_specs[index].name;
  for (const auto& extra : commands[index].first->remaining())
    extras.push_back(extra);
  for (const auto& extra : extras)
    if (extra.starts_with("-") && extra.size() > 1)
      throw usage_error("unknown option " + extra.substr(0, extra.find('=')));
  if (!extras.empty())
    throw usage_error(line.command + ": unexpected argument '" + extras.front() + "'");
  const auto& names = command_specs[index].positionals;
  if (command_specs[index].several) {
    const auto& words = commands[index].second;
    if (words.size() < names.size())
      throw usage_error(line.command + ": " + names[words.size()] + " is missing");
    line.positional = words;
    // The owner of unlock and extend comes last; every other word is a resource.
    line.resources.assign(words.begin(),
                          words.end() - static_cast<std::ptrdiff_t>(names.size() - 1));
    for (auto resource = line.resources.begin(); resource != line.resources.end(); ++resource)
      if (std::find(line.resources.begin(), resource, *resource) != resource)
        throw usage_error(line.command + ": resource '" + *resource + "' is named twice");
    return;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (commands[index].first->count(names[i]) == 0) {
      if (i >= command_specs[index].required)
        break;
      throw usage_error(line.command + ": " + names[i] + " is missing");
    }
    line.positional.push_back(commands[index].second[i]);
  }
}

// `option` was given but line.command is not one of `takers`: a usage_error.
void refuse_unless_for(const CLI::App& app, const command_line& line, const char* option,
                       std::initializer_list<const char*> takers) {
  if (app.count(option) == 0 || std::find_if(takers.begin(), takers.end(), [&](const char* c) {
                                  return line.command == c;
                                }) != takers.end())
    return;
  std::string list;
  for (const char* taker : takers)
    list += (list.empty() ? "" : ", ") + std::string(taker);
  throw usage_error(line.command + ": " + option + " does not apply (it is for " + list + ")");
}

// Options that only some commands take, and what each command needs besides its positionals.
void check_options_fit(const CLI::App& app, command_line& line, bool has_dashes,
                       const std::string& conflict_exit_code, const std::string& count,
                       const std::string& permits) {
  refuse_unless_for(app, line, "--count", {"list"});
  refuse_unless_for(app, line, "--admin-secret-file", {"break"});
  if (app.count("--count") > 0) {
    unsigned value = 0;
    const char* end = count.data() + count.size();
    const auto [stop, ec] = std::from_chars(count.data(), end, value);
    if (ec != std::errc{} || stop != end || value == 0)
      throw usage_error("--count: '" + count + "' is not a count (1 or more)");
    line.count = value;
  }
  refuse_unless_for(app, line, "--ttl", {"lock", "extend", "run"});
  refuse_unless_for(app, line, "--wait", {"lock", "run"});
  refuse_unless_for(app, line, "--kill-after", {"run"});
  refuse_unless_for(app, line, "--conflict-exit-code", {"run"});
  refuse_unless_for(app, line, "--shared", {"lock", "run"});
  refuse_unless_for(app, line, "--permits", {"lock", "run"});
  if (app.count("--permits") > 0) {
    const char* end = permits.data() + permits.size();
    const auto [stop, ec] = std::from_chars(permits.data(), end, line.permits);
    if (ec != std::errc{} || stop != end || line.permits == 0)
      throw usage_error("--permits: '" + permits + "' is not a number of permits (1 or more)");
  }
  if (line.shared && line.permits != 0)
    throw usage_error(line.command + ": --shared and --permits exclude each other");
  if ((line.shared || line.permits != 0) && line.resources.size() > 1)
    throw usage_error(line.command + ": " + (line.shared ? "--shared" : "--permits") +
                      " takes one resource (several resources are locked all or none, "
                      "exclusively)");
  if (line.output != "text" && line.output != "json")
    throw usage_error("--output: '" + line.output + "' is not text or json");
  if (line.command == "run" && !has_dashes)
    throw usage_error("run: give the command after --");
  if (line.command == "run" && line.tail.empty())
    throw usage_error("run: no command after --");
  if (line.command != "run" && has_dashes)
    throw usage_error(line.command + ": unexpected '--'");
  if ((line.command == "lock" || line.command == "extend") && app.count("--ttl") == 0)
    throw usage_error(line.command + ": --ttl is required");
  if (app.count("--conflict-exit-code") > 0) {
    int code = -1;
    const char* end = conflict_exit_code.data() + conflict_exit_code.size();
    const auto [stop, ec] = std::from_chars(conflict_exit_code.data(), end, code);
    if (ec != std::errc{} || stop != end || code < 0 || code > 255)
      throw usage_error("--conflict-exit-code: '" + conflict_exit_code +
                        "' is not an exit code (0 to 255)");
    line.conflict_exit_code = code;
  }
}

} // namespace

command_line parse_command_line(const std::vector<std::string>& args) {
  command_line line;
  // Everything after the first "--" is run's command, untouched.
  const auto dashes = std::find(args.begin(), args.end(), "--");
  const std::vector<std::string> head(args.begin(), dashes);
  const bool has_dashes = dashes != args.end();
  if (has_dashes)
    line.tail.assign(dashes + 1, args.end());

  cli_grammar grammar(line);
  // -h anywhere before "--" wins over every other problem of the line.
  if (std::find_if(head.begin(), head.end(),
                   [](const std::string& a) { return a == "-h" || a == "--help"; }) != head.end())
    throw help_requested{};
  parse_options(grammar, head);
  if (grammar.version)
    throw version_requested{};
  take_command(grammar, line);
  check_options_fit(grammar.app, line, has_dashes, grammar.conflict_exit_code, grammar.count,
                    grammar.permits);
  return line;
}

std::chrono::milliseconds duration_of(const std::string& flag, const std::string& text) {
  if (lacks_unit(text))
    throw usage_error(flag + ": '" + text + "' has no unit; write " + text + "ms, " + text + "s, " +
                      text + "m or " + text + "h");
  const auto value = parse_duration(text);
  if (!value)
    throw usage_error(flag + ": bad duration '" + text +
                      "' (e.g. 250ms, 1.5s, 1m30s, 1h; whole milliseconds)");
  return *value;
}

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

} // namespace redlockd::ctl
