#include "redlockd/lock/release_cleanups.hpp"

#include <variant>

namespace redlockd {

std::uint32_t release_cleanups::add(const hold_target& hold, const owner_id& owner,
                                    clock_type::time_point expires, released what) {
  // Entries are reused rather than freed: their strings keep their capacity.
  std::uint32_t index = 0;
  if (free_.empty()) {
    index = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
  } else {
    index = free_.back();
    free_.pop_back();
  }
  entry& e = entries_[index];
  e.key.assign(hold.name);
  e.kind = hold.kind;
  e.permits = hold.permits;
  e.owner = owner;
  e.expires = expires;
  e.what = what;
  e.watch = {};
  e.found = 0;
  e.refs = 0;
  return index;
}

void release_cleanups::everywhere(const hold_target& hold, const owner_id& owner,
                                  clock_type::time_point expires, released what,
                                  const lease_watch& expect, std::uint32_t spared) {
  const std::uint32_t index = add(hold, owner, expires, what);
  entries_[index].watch.expect_held = expect.expect_held;
  entries_[index].watch.expect_until = expect.expect_until;
  format(index, script_by::sha); // the same bytes for every node
  for (std::size_t node = 0; node < node_count_; ++node) {
    if ((spared & (std::uint32_t{1} << node)) != 0)
      continue;
    if (io_.usable(node))
      send(node, index);
    else
      owe(node, index);
  }
  free_if_unused(index);
}

void release_cleanups::on(std::size_t node, const hold_target& hold, const owner_id& owner,
                          clock_type::time_point expires, released what) {
  const std::uint32_t index = add(hold, owner, expires, what);
  if (io_.usable(node)) {
    format(index, script_by::sha);
    send(node, index);
  } else {
    owe(node, index);
  }
  free_if_unused(index);
}

void release_cleanups::format(std::uint32_t index, script_by by) {
  command_.clear();
  const entry& e = entries_[index];
  release_call call;
  call.owner = view(e.owner);
  call.wake = e.what != released::attempt ? wake_ : std::string_view();
  call.attempt = e.what != released::lock;
  traits_of(e.kind).write_release(command_, by, {e.kind, e.key, e.permits}, keys_, call, scratch_);
}

void release_cleanups::send(std::size_t node, std::uint32_t index) {
  // command_ holds the entry's release. Its reply only matters if it is NOSCRIPT or never
  // comes: then the release is sent again.
  ++entries_[index].refs;
  io_.send(node, request_tag{request_kind::cleanup, index, 1}, command_);
}

void release_cleanups::owe(std::size_t node, std::uint32_t index) {
  // Bounded: past this many, the oldest are left to expire by their TTL.
  constexpr std::size_t max_owed = 65536;
  auto& owed = owed_[node];
  if (owed.size() >= max_owed) {
    unref(owed.front());
    owed.erase(owed.begin());
  }
  ++entries_[index].refs;
  owed.push_back(index);
}

void release_cleanups::unref(std::uint32_t index) {
  if (--entries_[index].refs == 0)
    free_.push_back(index);
}

void release_cleanups::free_if_unused(std::uint32_t index) {
  if (entries_[index].refs == 0)
    free_.push_back(index);
}

void release_cleanups::on_reply(std::size_t node, const request_tag& tag, const script_reply* reply,
                                clock_type::time_point now) {
  if (tag.op >= entries_.size() || entries_[tag.op].refs == 0)
    return;
  entry& e = entries_[tag.op];
  if (reply == nullptr) {
    owe(node, tag.op); // the connection was lost: send it when the node is back
  } else if (const auto* error = std::get_if<error_reply>(reply); error && error->noscript()) {
    io_.reload_scripts(node);
    format(tag.op, script_by::source);
    send(node, tag.op);
  } else if (const auto* release = std::get_if<release_reply>(reply); release && release->result) {
    if (*release->result == -1)
      e.watch.missing |= std::uint32_t{1} << node;
    else if (*release->result == 1)
      ++e.found;
    if (const std::uint32_t lost = lost_keys(e.watch, e.found, now))
      key_lost_(lost, e.key);
  }
  unref(tag.op);
}

void release_cleanups::on_node_ready(std::size_t node, clock_type::time_point now) {
  auto owed = std::move(owed_[node]);
  owed_[node].clear();
  for (const std::uint32_t index : owed) {
    if (now < entries_[index].expires && io_.usable(node)) {
      format(index, script_by::sha);
      send(node, index);
    }
    unref(index);
  }
}

} // namespace redlockd
