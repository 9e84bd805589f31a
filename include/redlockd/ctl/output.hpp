// What redlockctl prints for a reply: successful replies as text or JSON, INFO made readable, and
// the message and exit code of a reply that is not a success.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace redlockd::ctl {

// OK, OK ... or PONG: the request did what was asked.
bool is_success_reply(const std::string& reply);

// Prints the successful `reply` to `command` (lock, unlock, extend, status, info or ping) on
// `out`: as text, or as one JSON object with `json` (info: the daemon's own JSON; unlock
// {"resource","released":true}; ping {"reply":"PONG"}). With more than one of `resources` (a set:
// MLOCK, MUNLOCK, MEXTEND), the JSON of lock, unlock and extend has them as "resources" too;
// "resource" is the first. STATUS's fields (readers=, permits=, label=) follow in text and are
// "readers", "permits_used", "permits" and "label" in JSON. Throws connection_error for a reply
// that does not have the expected fields.
void print_reply(std::ostream& out, const std::string& command, const std::string& resource,
                 const std::string& reply, bool json,
                 const std::vector<std::string>& resources = {});

// INFO's JSON as readable lines; fields the daemon does not send are left out, and text that is
// not a JSON object is printed as it is.
void print_info(std::ostream& out, const std::string& json_text);

// LIST's JSON as one line per resource ("<resource> <kind> <ms>ms <labels...>"), or as it came
// with `json`. Throws connection_error for text that is not LIST's JSON.
void print_listing(std::ostream& out, const std::string& json_text, bool json);

// Says what went wrong on `err` and returns the exit code for a reply that is not a success.
int report_failure(std::ostream& err, const std::string& reply);

} // namespace redlockd::ctl
