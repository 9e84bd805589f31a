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

// A JSON value as text: a string without its quotes, anything else as JSON.
std::string text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
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

void print_listing(std::ostream& out, const std::string& json_text, bool json) {
  const auto listing = nlohmann::json::parse(json_text, nullptr, false);
  if (listing.is_discarded() || !listing.is_object() || !listing.contains("locks") ||
      !listing["locks"].is_array())
    throw connection_error("unexpected reply to LIST: OK " + json_text);
  if (json) {
    out << json_text << "\n"; // the daemon's own JSON, one line
    return;
  }
  for (const auto& lock : listing["locks"]) {
    out << text(lock.value("resource", nlohmann::json())) << " "
        << text(lock.value("kind", nlohmann::json())) << " "
        << text(lock.value("ttl_ms", nlohmann::json())) << "ms";
    for (const auto& label : lock.value("labels", nlohmann::json::array()))
      out << " " << text(label);
    out << "\n";
  }
  if (listing.value("truncated", false))
    out << "(more not shown: give a prefix or a larger --count)\n";
}

namespace {

// STATUS's `OK HELD <ms> [field=value...]` or `OK FREE [field=value...]`.
void print_status(std::ostream& out, const std::string& resource, const std::string& reply,
                  bool json) {
  const auto words = words_of(reply.starts_with("OK ") ? reply.substr(3) : "");
  const bool held = !words.empty() && words[0] == "HELD";
  const std::size_t first_field = held ? 2 : 1;
  if (words.empty() || (held ? words.size() < 2 : words[0] != "FREE"))
    throw connection_error("unexpected reply to STATUS: " + reply);
  nlohmann::json object = {{"resource", resource}, {"state", held ? "held" : "free"}};
  if (held)
    object["pttl_ms"] = number(words[1]);
  std::string text = held ? "held " + words[1] : "free";
  for (std::size_t i = first_field; i < words.size(); ++i) {
    const auto equals = words[i].find('=');
    if (equals == std::string::npos)
      throw connection_error("unexpected reply to STATUS: " + reply);
    const std::string name = words[i].substr(0, equals);
    const std::string value = words[i].substr(equals + 1);
    text += " " + words[i];
    if (name == "label") {
      object["label"] = value;
    } else if (name == "readers") {
      object["readers"] = number(value);
    } else if (name == "permits") {
      const auto slash = value.find('/');
      if (slash == std::string::npos)
        throw connection_error("unexpected reply to STATUS: " + reply);
      object["permits_used"] = number(value.substr(0, slash));
      object["permits"] = number(value.substr(slash + 1));
    } // fields of a newer daemon: in the text only
  }
  out << (json ? object.dump() : text) << "\n";
}

} // namespace

void print_reply(std::ostream& out, const std::string& command, const std::string& resource,
                 const std::string& reply, bool json, const std::vector<std::string>& resources) {
  const std::string body = reply.starts_with("OK ") ? reply.substr(3) : "";
  if (command == "info") {
    if (json)
      out << body << "\n"; // the daemon's own JSON, one line
    else
      print_info(out, body);
    return;
  }
  if (command == "status") {
    print_status(out, resource, reply, json);
    return;
  }
  // A set's JSON names every resource besides the first.
  auto with_set = [&](nlohmann::json object) {
    if (resources.size() > 1)
      object["resources"] = resources;
    return object.dump();
  };
  if (command == "list") {
    print_listing(out, body, json);
    return;
  }
  if (json && command == "lock") {
    const auto words = words_of(body);
    if (words.size() != 3)
      throw connection_error("unexpected reply to LOCK: " + reply);
    out << with_set({{"resource", resource},
                     {"owner", words[0]},
                     {"fence", number(words[1])},
                     {"validity_ms", number(words[2])}})
        << "\n";
    return;
  }
  if (json && command == "extend") {
    const auto words = words_of(body);
    if (words.size() != 1)
      throw connection_error("unexpected reply to EXTEND: " + reply);
    out << with_set({{"resource", resource}, {"validity_ms", number(words[0])}}) << "\n";
    return;
  }
  if (json && command == "unlock") {
    out << with_set({{"resource", resource}, {"released", true}}) << "\n";
    return;
  }
  if (json && command == "break") {
    out << nlohmann::json{{"resource", resource}, {"broken", true}}.dump() << "\n";
    return;
  }
  if (json && command == "ping") {
    out << nlohmann::json{{"reply", reply}}.dump() << "\n";
    return;
  }
  if (command != "unlock" && command != "break")
    out << (reply.starts_with("OK ") ? body : reply) << "\n";
}

int report_failure(std::ostream& err, const std::string& reply) {
  err << "redlockctl: " << reply << "\n";
  if (reply.starts_with("ERR NOAUTH") && reply.find("admin secret") != std::string::npos) {
    err << "redlockctl: give the admin secret with --admin-secret-file or "
           "REDLOCKD_ADMIN_SECRET\n";
    return exit_code::auth_failed;
  }
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
