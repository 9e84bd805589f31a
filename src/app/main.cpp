// redlockd: command line → config → daemon. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or
// config.
#include "redlockd/app/daemon.hpp"
#include "redlockd/config/auth.hpp"
#include "redlockd/config/config.hpp"
#include "redlockd/config/logging.hpp"
#include "redlockd/net/tls_files.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace {

constexpr int exit_runtime = 1;
constexpr int exit_usage = 2;

constexpr std::string_view usage = R"(usage: redlockd [options]

Runs the Redlock lock manager in the foreground.

options:
  --config FILE        JSON configuration (default: built-in local fleet on 127.0.0.1:7001-7005)
  --listen HOST:PORT   override "listen" (default 127.0.0.1:7400)
  --nodes A,B,...      override "nodes", e.g. 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
  --check-config       validate the configuration (and load its TLS files) and exit
                       (0 valid, 2 invalid)
  --version            print the version and exit
  --help               print this help and exit

exit codes: 0 ok, 1 runtime failure (e.g. cannot listen), 2 bad usage or configuration
)";

struct options {
  std::string config_file;
  std::string listen;
  std::string nodes;
  bool check_only = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw redlockd::config_error("cannot read config file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Secrets come from files and the environment of the process.
const redlockd::secret_sources process_secrets{
    [](const std::string& path) -> std::optional<std::string> {
      std::ifstream in(path, std::ios::binary);
      if (!in)
        return std::nullopt;
      std::ostringstream text;
      text << in.rdbuf();
      if (in.bad())
        return std::nullopt;
      return text.str();
    },
    [](const char* name) -> std::optional<std::string> {
      const char* value = std::getenv(name);
      return value ? std::optional<std::string>(value) : std::nullopt;
    }};

redlockd::config load(const options& opts) {
  redlockd::config cfg;
  if (!opts.config_file.empty())
    cfg = redlockd::parse_config(read_file(opts.config_file));
  if (!opts.listen.empty()) {
    try {
      cfg.listen = redlockd::parse_endpoint(opts.listen);
    } catch (const redlockd::config_error& e) {
      throw redlockd::config_error(std::string("--listen: ") + e.what());
    }
  }
  if (!opts.nodes.empty()) {
    cfg.nodes.clear();
    std::string_view rest = opts.nodes;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      try {
        cfg.nodes.push_back(redlockd::parse_endpoint(item));
      } catch (const redlockd::config_error& e) {
        throw redlockd::config_error("--nodes: " + std::string(e.what()));
      }
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  redlockd::validate(cfg);
  redlockd::resolve_secrets(cfg, process_secrets);
  return cfg;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= argc) {
        std::cerr << "redlockd: " << arg << " needs a value\n";
        return false;
      }
      into = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      return 0;
    } else if (arg == "--version") {
      std::cout << "redlockd " << REDLOCKD_VERSION << "\n";
      return 0;
    } else if (arg == "--check-config") {
      opts.check_only = true;
    } else if (arg == "--config") {
      if (!value(opts.config_file))
        return exit_usage;
    } else if (arg == "--listen") {
      if (!value(opts.listen))
        return exit_usage;
    } else if (arg == "--nodes") {
      if (!value(opts.nodes))
        return exit_usage;
    } else {
      std::cerr << "redlockd: unknown option '" << arg << "'\n" << usage;
      return exit_usage;
    }
  }

  redlockd::config cfg;
  try {
    cfg = load(opts);
  } catch (const redlockd::config_error& e) {
    std::cerr << "redlockd: invalid configuration: " << e.what() << "\n";
    return exit_usage;
  }
  if (opts.check_only) {
    try {
      redlockd::check_tls_files(cfg);
    } catch (const std::exception& e) {
      std::cerr << "redlockd: invalid configuration: " << e.what() << "\n";
      return exit_usage;
    }
    std::cout << "configuration ok: " << cfg.nodes.size() << " nodes, listen "
              << cfg.listen.to_string() << "\n";
    return 0;
  }

  std::shared_ptr<spdlog::logger> log;
  try {
    log = redlockd::make_logger(cfg);
  } catch (const std::exception& e) {
    std::cerr << "redlockd: cannot open the log: " << e.what() << "\n";
    return exit_runtime;
  }
  try {
    // SIGHUP reads the configuration again for its log settings and the secrets.
    auto reload = [opts] { return load(opts); };
    redlockd::daemon d(std::move(cfg), log, reload);
    return d.run();
  } catch (const std::exception& e) {
    log->critical("cannot run: {}", e.what());
    return exit_runtime;
  }
}
