// One client connection (see client_session.hpp): the read loop, dispatch to the engine,
// replies in request order through the batching writer, AUTH, and the slowloris timers.
#include "redlockd/server/client_session.hpp"

#include "redlockd/net/tls.hpp"
#include "redlockd/server/listener.hpp"

#include <spdlog/spdlog.h>

#include <type_traits>

namespace redlockd {
namespace {

// An idle connection reads into 1 KiB (a pipeline of 8 LOCKs fits); a read that fills it grows
// the buffer to 16 KiB for the rest of the burst, and one that brings 1 KiB or less gives it
// back, with what the burst left in the line buffer and the writer over 4 KiB.
constexpr std::size_t read_quiet = 1024;
constexpr std::size_t read_burst = 16 * 1024;
constexpr std::size_t spare_kept = 4 * 1024;
// Past either bound a client that does not read its replies stops being read.
constexpr std::size_t max_pending_replies = 4096;
constexpr std::size_t max_pending_bytes = 1 << 20;
// One read can hold thousands of requests (3,276 INFOs in 16 KiB, each answered with ~700
// bytes): after this many a session lets the others and the masters' replies run, and stops
// if its client is not reading.
constexpr std::size_t lines_per_turn = 64;

} // namespace

client_session::client_session(stream_socket socket, std::string peer, listener& server,
                               session_context& context, std::uint64_t id, tls_context* tls)
    : stream_(std::move(socket)), server_(server), context_(context), id_(id),
      lines_(context.cfg.max_line_bytes), read_buffer_(read_quiet, read_burst),
      writer_(stream_, *this), resume_(stream_.get_executor()),
      partial_timer_(stream_.get_executor()), auth_(!context.cfg.client_secret.empty()),
      auth_timer_(stream_.get_executor()), peer_(std::move(peer)) {
  if (tls != nullptr)
    stream_.start_tls(*tls);
}

client_session::~client_session() = default;

void client_session::start() {
  // A flush posted or a write in flight keeps the session alive, even once it has closed.
  writer_.hold_while_busy(weak_from_this());
  watch_auth_deadline();
  net::co_spawn(
      stream_.get_executor(), read_requests(),
      [self = shared_from_this(),
       log = log_failure{context_.log, "client " + std::to_string(id_)}](std::exception_ptr error) {
        log(error);
        if (error)
          self->close();
      });
}

void client_session::finish_and_close() {
  reading_done_ = true;
  finish_if_done();
}

void client_session::close(bool graceful) {
  if (closed_)
    return;
  closed_ = true;
  if (graceful && tls_ready_) {
    // A clean end for TLS clients that insist on close_notify; the socket closes right after.
    stream_.close_after_notify(std::chrono::seconds(1), shared_from_this());
  } else {
    stream_.shutdown();
    stream_.close();
  }
  resume_.cancel();
  partial_timer_.cancel();
  auth_timer_.cancel();
  replies_.clear();
  writer_.discard();
  // Waiters leave their queues and KEEP locks are released on every node.
  if (used_engine_state_)
    context_.engine.client_gone(this);
  // Operations in flight keep this object alive through their sink and deliver into nothing.
  server_.forget(shared_from_this());
}

awaitable<void> client_session::read_requests() {
  auto self = shared_from_this();
  if (stream_.tls() != nullptr && !co_await accept_tls())
    co_return;
  while (!reading_done_ && !closed_) {
    if (backlogged())
      co_await wait_while_backlogged();
    if (closed_)
      co_return;
    error_code_t ec;
    const auto space = read_buffer_.space();
    const std::size_t n = co_await stream_.read_some(net::buffer(space.data(), space.size()), ec);
    if (ec) {
      if (ec == net::error::eof && !used_engine_state_) {
        // Half-closed (`nc -N`, `printf ... | nc -q 1`): answer what came, then close.
        reading_done_ = true;
        finish_if_done();
      } else {
        // A client that sent WAIT or KEEP and then its end of input has left: its waiters must
        // leave the queues and its KEEP locks be released now, not when a reply fails.
        close();
      }
      co_return;
    }
    if (reading_done_ || closed_)
      co_return; // draining for shutdown: requests that come now are not read
    lines_.feed({read_buffer_.space().data(), n});
    const bool quiet = read_buffer_.filled(n);
    bool completed_line = false;
    std::string_view line;
    for (std::size_t handled = 1;; ++handled) {
      if (handled % lines_per_turn == 0) {
        co_await net::post(stream_.get_executor(), net::use_awaitable);
        if (backlogged())
          co_await wait_while_backlogged();
        if (reading_done_ || closed_)
          break;
      }
      const auto status = lines_.next(line);
      if (status == line_splitter::status::need_more)
        break;
      if (status == line_splitter::status::too_long) {
        deliver(reserve_reply(),
                format_error(err_code::line_too_long,
                             "line longer than " + std::to_string(context_.cfg.max_line_bytes) +
                                 " bytes; closing"));
        reading_done_ = true;
        break;
      }
      handle_line(line);
      completed_line = true;
      if (reading_done_ || closed_)
        break;
    }
    if (quiet) {
      lines_.release_spare(spare_kept);
      writer_.release_spare(spare_kept);
    }
    watch_partial_line(completed_line);
    finish_if_done();
  }
}

awaitable<bool> client_session::accept_tls() {
  // Counted in max_connections from accept on; a silent or non-TLS peer is closed here.
  tls_stream& tls = *stream_.tls();
  error_code_t ec;
  co_await tls.accept(std::chrono::milliseconds(context_.cfg.tls->handshake_timeout_ms), ec);
  if (ec) {
    if (!closed_)
      context_.log->warn("client {} from {}: TLS handshake failed: {}", id_, peer_,
                         tls.describe(ec));
    close();
    co_return false;
  }
  tls_ready_ = true;
  context_.log->debug("client {}: TLS handshake done ({})", id_, tls.summary());
  co_return true;
}

awaitable<void> client_session::wait_while_backlogged() {
  // Woken by on_written once the client has read enough; by close() when it ends.
  while (backlogged() && !closed_) {
    error_code_t ec;
    resume_.expires_at(clock_type::time_point::max());
    co_await resume_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

void client_session::handle_line(std::string_view line) {
  parse_result parsed = parse_request(line, context_.limits);
  if (std::holds_alternative<std::monostate>(parsed))
    return;
  const std::uint64_t seq = reserve_reply();
  replies_.emplace_back();
  if (auto* error = std::get_if<parse_error>(&parsed)) {
    ++context_.errors;
    deliver(seq, format_error(error->code, error->message));
    return;
  }
  if (!auth_.allows(std::get<request>(parsed))) {
    ++context_.errors;
    deliver(seq, format_error(err_code::noauth, "authentication required; send AUTH <secret>"));
    return;
  }
  // LOCK, UNLOCK and EXTEND replies are counted by outcome when they are written.
  const request& req_variant = std::get<request>(parsed);
  if (pending_reply* slot = reply_slot(seq)) {
    if (std::holds_alternative<lock_request>(req_variant) ||
        std::holds_alternative<mlock_request>(req_variant))
      slot->counted = result_op::lock;
    else if (std::holds_alternative<unlock_request>(req_variant) ||
             std::holds_alternative<munlock_request>(req_variant))
      slot->counted = result_op::unlock;
    else if (std::holds_alternative<extend_request>(req_variant) ||
             std::holds_alternative<mextend_request>(req_variant))
      slot->counted = result_op::extend;
  }
  try {
    dispatch(seq, req_variant);
  } catch (const std::exception& e) {
    context_.log->error("client {}: request failed: {}", id_, e.what());
    if (seq >= first_seq_ && seq - first_seq_ < replies_.size() &&
        !replies_[seq - first_seq_].ready())
      deliver(seq, format_error(err_code::internal, "internal error"));
  }
}

void client_session::dispatch(std::uint64_t seq, const request& parsed) {
  std::visit(
      [&](const auto& req) {
        using type = std::decay_t<decltype(req)>;
        if constexpr (std::is_same_v<type, ping_request>) {
          deliver(seq, format_pong(req.word));
        } else if constexpr (std::is_same_v<type, hello_request>) {
          deliver(seq, context_.hello_line);
        } else if constexpr (std::is_same_v<type, auth_request>) {
          handle_auth(seq, req.secret);
        } else if constexpr (std::is_same_v<type, lock_request> ||
                             std::is_same_v<type, mlock_request>) {
          if (context_.shutting_down) {
            deliver(seq, format_error(err_code::shutting_down, "the daemon is stopping"));
            return;
          }
          if (req.wait_ms || req.keep)
            used_engine_state_ = true;
          if constexpr (std::is_same_v<type, lock_request>)
            context_.engine.lock(req, shared_from_this(), seq);
          else
            context_.engine.mlock(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, unlock_request>) {
          context_.engine.unlock(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, munlock_request>) {
          context_.engine.munlock(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, extend_request>) {
          context_.engine.extend(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, mextend_request>) {
          context_.engine.mextend(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, status_request>) {
          if (context_.status == nullptr)
            deliver(seq, format_error(err_code::internal, "STATUS is not available"));
          else
            context_.status->query(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, info_request>) {
          deliver(seq, format_info(context_.info_json()));
        } else if constexpr (std::is_same_v<type, quit_request>) {
          deliver(seq, format_ok());
          reading_done_ = true;
        } else if constexpr (std::is_same_v<type, list_request>) {
          if (context_.operations == nullptr)
            deliver(seq, format_error(err_code::internal, "LIST is not available"));
          else
            context_.operations->list(req, shared_from_this(), seq);
        } else if constexpr (std::is_same_v<type, break_request>) {
          handle_break(seq, req);
        } else {
          static_assert(std::is_same_v<type, break_request>, "every request is served");
        }
      },
      parsed);
}

client_session::pending_reply* client_session::reply_slot(std::uint64_t seq) {
  if (closed_ || seq < first_seq_)
    return nullptr;
  const std::uint64_t index = seq - first_seq_;
  while (replies_.size() <= index)
    replies_.emplace_back();
  return &replies_[index];
}

void client_session::deliver(std::uint64_t seq, std::string line) {
  if (pending_reply* slot = reply_slot(seq)) {
    slot->line = std::move(line);
    write_ready_replies();
  }
}

void client_session::deliver_grant(std::uint64_t seq, grant_reply grant, clock_type::time_point) {
  if (pending_reply* slot = reply_slot(seq)) {
    slot->grant = std::move(grant);
    write_ready_replies();
  }
}

void client_session::write_ready_replies() {
  // Replies leave in request order: only a ready head can be written.
  while (!replies_.empty() && replies_.front().ready()) {
    pending_reply& head = replies_.front();
    if (head.grant) {
      // The validity is what is left now, when the line is written (a WAIT ahead of it may
      // have held it back). With none left the client is told it did not get the lock.
      const auto until = context_.engine.valid_until(*head.grant);
      if (!until || !head.grant->refresh(clock_type::now(), *until)) {
        context_.engine.grant_expired(*head.grant);
        head.grant->line = head.grant->expired_line();
        head.pushes.clear(); // a LOST about a lock the client never saw
      }
      if (head.counted)
        context_.results.add_reply(*head.counted, head.grant->line);
      writer_.append(head.grant->line);
    } else {
      if (head.counted)
        context_.results.add_reply(*head.counted, *head.line);
      writer_.append(*head.line);
    }
    writer_.append(head.pushes);
    replies_.pop_front();
    ++first_seq_;
  }
}

void client_session::push(std::string line, std::uint64_t after_seq) {
  if (closed_)
    return;
  // Not a reply: it goes out ahead of replies still waiting for their turn, but after the
  // reply that granted the lock it is about.
  if (pending_reply* slot = reply_slot(after_seq)) {
    slot->pushes.append(line);
    return;
  }
  writer_.append(line);
}

bool client_session::on_written(const error_code_t& ec) {
  if (ec) {
    close();
    return false;
  }
  if (!backlogged())
    resume_.cancel();
  return true;
}

bool client_session::backlogged() const {
  return replies_.size() > max_pending_replies || writer_.unwritten_bytes() > max_pending_bytes;
}

void client_session::watch_partial_line(bool progressed) {
  // The clock runs for one unfinished line: a client whose reads keep ending mid-line while its
  // lines keep completing (a busy pipeliner) is making progress, not a slowloris.
  if (lines_.buffered() == 0 || progressed)
    partial_since_ = {};
  if (lines_.buffered() == 0)
    return;
  const auto now = clock_type::now();
  if (partial_since_ == clock_type::time_point{})
    partial_since_ = now;
  if (partial_timer_armed_)
    return;
  partial_timer_armed_ = true;
  partial_timer_.expires_at(partial_since_ +
                            std::chrono::milliseconds(context_.cfg.partial_line_timeout_ms));
  partial_timer_.async_wait([self = shared_from_this()](const error_code_t& ec) {
    self->partial_timer_armed_ = false;
    if (ec || self->closed_)
      return;
    if (self->partial_since_ != clock_type::time_point{}) {
      const auto deadline = self->partial_since_ +
                            std::chrono::milliseconds(self->context_.cfg.partial_line_timeout_ms);
      if (clock_type::now() >= deadline) {
        self->context_.log->info("client {}: closing, a partial line waited too long", self->id_);
        self->close();
        return;
      }
      self->watch_partial_line(false); // a newer partial line: wait for its own deadline
    }
  });
}

void client_session::handle_break(std::uint64_t seq, const break_request& req) {
  // Only a connection that sent AUTH with the admin secret; a client secret never grants it.
  if (!auth_.admin() || context_.cfg.admin_secret.empty()) {
    ++context_.errors;
    context_.log->warn("client {} from {}: BREAK '{}' refused: not authenticated as admin", id_,
                       peer_, req.resource);
    deliver(seq, format_error(err_code::noauth, "BREAK needs AUTH with the admin secret"));
    return;
  }
  if (context_.operations == nullptr) {
    deliver(seq, format_error(err_code::internal, "BREAK is not available"));
    return;
  }
  context_.operations->break_hold(req, peer_, shared_from_this(), seq);
}

void client_session::handle_auth(std::uint64_t seq, std::string_view candidate) {
  // Compared with the secrets configured now: SIGHUP may have replaced them since the accept.
  const auto outcome = auth_.attempt(candidate, context_.cfg.client_secret,
                                     context_.cfg.admin_secret, context_.cfg.max_auth_failures);
  if (outcome == connection_auth::outcome::accepted) {
    auth_timer_.cancel();
    deliver(seq, format_ok());
    return;
  }
  ++context_.errors;
  ++context_.auth_failures;
  const bool closing = outcome == connection_auth::outcome::refused_closing;
  std::uint64_t held_back = 0;
  if (context_.auth_failure_log.take(clock_type::now(), held_back))
    context_.log->warn(
        "client {} from {}: AUTH refused (failure {} of {} on this connection){}{}", id_, peer_,
        auth_.failures(), context_.cfg.max_auth_failures, closing ? "; closing" : "",
        held_back > 0 ? "; " + std::to_string(held_back) + " more refused AUTHs not logged"
                      : std::string());
  if (!closing) {
    deliver(seq, format_error(err_code::auth_failed, "wrong secret"));
    return;
  }
  deliver(seq, format_error(err_code::auth_failed, "wrong secret; too many failures, closing"));
  reading_done_ = true;
  // The reply gets a moment to leave; a client that does not read it does not keep the socket.
  auth_timer_.expires_after(std::chrono::seconds(1));
  auth_timer_.async_wait([self = shared_from_this()](const error_code_t& ec) {
    if (!ec)
      self->close();
  });
}

void client_session::watch_auth_deadline() {
  if (auth_.authenticated())
    return;
  auth_timer_.expires_after(std::chrono::milliseconds(context_.cfg.auth_timeout_ms));
  auth_timer_.async_wait([self = shared_from_this()](const error_code_t& ec) {
    if (ec || self->closed_ || self->auth_.authenticated() || self->reading_done_)
      return;
    self->context_.log->info("client {} from {}: closing, not authenticated within {} ms",
                             self->id_, self->peer_, self->context_.cfg.auth_timeout_ms);
    self->close();
  });
}

void client_session::finish_if_done() {
  // After QUIT, a too long line or the client's end of input: close once every reply is out.
  if (!reading_done_ || closed_ || !writer_.idle() || !replies_.empty())
    return;
  close(true);
}

} // namespace redlockd
