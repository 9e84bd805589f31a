// What redlockctl prints for a reply: successful replies as text or JSON, INFO made readable, and
// the message and exit code of a reply that is not a success.
#include "redlockd/ctl/output.hpp"

#include "redlockd/ctl/line_connection.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <sstream>
#include <utility>
#include <vector>

namespace redlockd::ctl {
namespace {

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
} // namespace

bool is_success_reply(const std::string& reply) {
  return reply == "OK" || reply.starts_with("OK ") || reply.starts_with("PONG");
}

void print_info(std::ostream& out, const std::string& json_text) {
  const auto info = nlohmann::json::parse(json_text, nullptr, false);
  if (info.is_discarded() || !info.is_object()) {
    out << json_text << "\n";
    return;
  }
  auto text = [](const nlohmann::json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  auto line = [&](std::initializer_list<std::pair<const char*, const char*>> fields) {
    std::string joined;
    for (const auto& [key, label] : fields)
      if (info.contains(key))
        joined += (joined.empty() ? "" : ", ") + std::string(label) + text(info[key]);
    if (!joined.empty())
      out << joined << "\n";
  };
  out << "redlockd" << (info.contains("version") ? " " + text(info["version"]) : "") << "\n";
  if (info.contains("uptime_s"))
    out << "up " << text(info["uptime_s"]) << " s" << (info.contains("quorum") ? ", " : "\n");
  line({{"quorum", "quorum "}});
  if (info.contains("nodes") && info["nodes"].is_array()) {
    out << "nodes:\n";
    for (const auto& node : info["nodes"]) {
      if (!node.is_object())
        continue;
      out << "  " << (node.contains("address") ? text(node["address"]) : "?");
      if (node.contains("state"))
        out << "  " << text(node["state"]);
      if (node.contains("rtt_us") && node["rtt_us"].is_number() && node["rtt_us"] >= 0)
        out << "  rtt " << text(node["rtt_us"]) << " us";
      if (node.contains("quarantined_ms") && node["quarantined_ms"].is_number() &&
          node["quarantined_ms"] > 0)
        out << "  quarantined " << text(node["quarantined_ms"]) << " ms more";
      out << "\n";
    }
  }
  line({{"clients", "clients "},
        {"waiters", "waiters "},
        {"keep_locks", "keep locks "},
        {"operations_in_flight", "in flight "}});
  line({{"fence_high_water", "fence high water "}, {"max_ttl_granted", "max ttl granted ms "}});
  if (info.contains("counters") && info["counters"].is_object()) {
    out << "counters:";
    for (const auto& [name, value] : info["counters"].items())
      out << " " << name << "=" << text(value);
    out << "\n";
  }
}

void print_reply(std::ostream& out, const std::string& command, const std::string& resource,
                 const std::string& reply, bool json) {
  const std::string body = reply.starts_with("OK ") ? reply.substr(3) : "";
  if (command == "info") {
    if (json)
      out << body << "\n"; // the daemon's own JSON, one line
    else
      print_info(out, body);
    return;
  }
  if (command == "status") {
    const auto words = words_of(body);
    const bool held = !words.empty() && words[0] == "HELD";
    if (words.empty() || (held ? words.size() != 2 : words.size() != 1 || words[0] != "FREE"))
      throw connection_error("unexpected reply to STATUS: " + reply);
    if (json) {
      nlohmann::json object = {{"resource", resource}, {"state", held ? "held" : "free"}};
      if (held)
        object["pttl_ms"] = number(words[1]);
      out << object.dump() << "\n";
    } else {
      out << (held ? "held " + words[1] : "free") << "\n";
    }
    return;
  }
  if (json && command == "lock") {
    const auto words = words_of(body);
    if (words.size() != 3)
      throw connection_error("unexpected reply to LOCK: " + reply);
    out << nlohmann::json{{"resource", resource},
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
    out << nlohmann::json{{"resource", resource}, {"validity_ms", number(words[0])}}.dump() << "\n";
    return;
  }
  if (json && command == "unlock") {
    out << nlohmann::json{{"resource", resource}, {"released", true}}.dump() << "\n";
    return;
  }
  if (json && command == "ping") {
    out << nlohmann::json{{"reply", reply}}.dump() << "\n";
    return;
  }
  if (command != "unlock")
    out << (reply.starts_with("OK ") ? body : reply) << "\n";
}

int report_failure(std::ostream& err, const std::string& reply) {
  err << "redlockctl: " << reply << "\n";
  if (reply.starts_with("ERR NOAUTH")) {
    err << "redlockctl: the daemon wants a secret: give --secret-file or set "
           "REDLOCKD_CLIENT_SECRET\n";
    return exit_code::auth_failed;
  }
  if (reply.starts_with("BUSY"))
    return exit_code::busy;
  if (reply.starts_with("NOQUORUM"))
    return exit_code::no_quorum;
  if (reply.starts_with("NOTHELD"))
    return exit_code::not_held;
  return exit_code::refused;
}

} // namespace redlockd::ctl
