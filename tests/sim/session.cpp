#include "session.hpp"

#include <type_traits>

#include "daemon.hpp"

namespace redlockd::sim {

void sim_session::request(std::uint32_t record, std::string_view line,
                          const request_limits& limits) {
  if (closed_)
    return;
  parse_result parsed = parse_request(line, limits);
  if (std::holds_alternative<std::monostate>(parsed))
    return;
  const std::uint64_t seq = next_seq_++;
  records_.push_back(record);
  replies_.emplace_back();
  if (auto* error = std::get_if<parse_error>(&parsed)) {
    deliver(seq, format_error(error->code, error->message));
    return;
  }
  lock_engine& engine = daemon_.engine();
  std::visit(
      [&](const auto& req) {
        using type = std::decay_t<decltype(req)>;
        if constexpr (std::is_same_v<type, lock_request> || std::is_same_v<type, mlock_request>) {
          if (req.wait_ms || req.keep)
            used_engine_state_ = true;
          if constexpr (std::is_same_v<type, lock_request>)
            engine.lock(req, shared_from_this(), seq);
          else
            engine.mlock(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, unlock_request>) {
          engine.unlock(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, munlock_request>) {
          engine.munlock(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, extend_request>) {
          engine.extend(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, mextend_request>) {
          engine.mextend(req, shared_from_this(), seq);
        } else {
          deliver(seq, format_error(err_code::unknown_command, "not simulated"));
        }
      },
      std::get<redlockd::request>(parsed));
}

sim_session::pending_reply* sim_session::reply_slot(std::uint64_t seq) {
  if (closed_ || seq < first_seq_)
    return nullptr;
  const std::uint64_t index = seq - first_seq_;
  while (replies_.size() <= index)
    replies_.emplace_back();
  return &replies_[index];
}

void sim_session::deliver(std::uint64_t seq, std::string line) {
  if (!closed_ && (seq < first_seq_ || (reply_slot(seq) && reply_slot(seq)->ready()))) {
    client_.on_extra_reply(records_[seq]);
    return;
  }
  if (pending_reply* slot = reply_slot(seq)) {
    client_.on_decided(records_[seq]);
    slot->line = std::move(line);
    write_ready_replies();
  }
}

void sim_session::deliver_grant(std::uint64_t seq, grant_reply grant, clock_type::time_point) {
  if (!closed_ && (seq < first_seq_ || (reply_slot(seq) && reply_slot(seq)->ready()))) {
    client_.on_extra_reply(records_[seq]);
    return;
  }
  if (pending_reply* slot = reply_slot(seq)) {
    client_.on_decided(records_[seq]);
    slot->grant = std::move(grant);
    write_ready_replies();
  }
}

void sim_session::write_ready_replies() {
  // As client_session::write_ready_replies: in request order, a grant's validity as it is now.
  while (!closed_ && !replies_.empty() && replies_.front().ready()) {
    pending_reply head = std::move(replies_.front());
    replies_.pop_front();
    const std::uint32_t record = records_[first_seq_];
    ++first_seq_;
    if (head.grant) {
      lock_engine& engine = daemon_.engine();
      const auto until = engine.valid_until(*head.grant);
      if (!until || !head.grant->refresh(daemon_.now(), *until)) {
        engine.grant_expired(*head.grant);
        client_.on_grant_expired(record, head.grant->line);
        head.grant->line = head.grant->expired_line();
        head.pushes.clear(); // a LOST about a lock the client never saw
      }
      client_.on_reply(record, head.grant->line);
    } else {
      client_.on_reply(record, *head.line);
    }
    // Pushes are whole lines; a slot may hold several.
    std::string_view pushes = head.pushes;
    while (!pushes.empty() && !closed_) {
      const std::size_t end = pushes.find('\n');
      client_.on_push(pushes.substr(0, end + 1));
      pushes.remove_prefix(end == std::string_view::npos ? pushes.size() : end + 1);
    }
  }
}

void sim_session::push(std::string line, std::uint64_t after_seq) {
  if (closed_)
    return;
  if (pending_reply* slot = reply_slot(after_seq)) {
    slot->pushes.append(line);
    return;
  }
  client_.on_push(line);
}

// Grants decided but not yet written when the connection ends: their keys still hold the
// masters (until released or expired), which the checkers must know as of a grant written late.
void sim_session::report_unseen_grants() {
  for (std::size_t i = 0; i < replies_.size(); ++i)
    if (replies_[i].grant)
      client_.on_grant_expired(records_[first_seq_ + i], replies_[i].grant->line);
}

void sim_session::close() {
  if (closed_)
    return;
  closed_ = true;
  report_unseen_grants();
  replies_.clear();
  if (used_engine_state_ && daemon_.alive())
    daemon_.engine().client_gone(this);
}

void sim_session::daemon_died() {
  if (closed_)
    return;
  closed_ = true;
  report_unseen_grants();
  replies_.clear();
  client_.on_connection_lost();
}

} // namespace redlockd::sim
