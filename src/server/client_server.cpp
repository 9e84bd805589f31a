#include "redlockd/server/client_server.hpp"

#include "redlockd/net/tls.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <type_traits>

namespace redlockd {
namespace {

constexpr std::size_t read_chunk = 16 * 1024;
// Past either bound a client that does not read its replies stops being read.
constexpr std::size_t max_pending_replies = 4096;
constexpr std::size_t max_pending_bytes = 1 << 20;
// One read can hold thousands of requests (3,276 INFOs in 16 KiB, each answered with ~700
// bytes): after this many a session lets the others and the masters' replies run, and stops
// if its client is not reading.
constexpr std::size_t lines_per_turn = 64;

// A peer that vanished without FIN or RST is only noticed by probing: after `idle_s` of silence,
// three probes idle_s / 3 apart (at least 1 s), so it is dropped about 2 * idle_s after.
void enable_keepalive(tcp::socket& socket, std::uint32_t idle_s) {
  if (idle_s == 0)
    return;
  error_code_t ignored;
  socket.set_option(net::socket_base::keep_alive(true), ignored);
  const int fd = socket.native_handle();
  const int idle = static_cast<int>(idle_s);
  const int interval = std::max(1, idle / 3);
  const int probes = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

} // namespace

client_server::client_server(net::io_context& io, session_context& context)
    : io_(io), context_(context), acceptor_(io) {}

void open_listener(tcp::acceptor& acceptor, const endpoint& address) {
  tcp::resolver resolver(acceptor.get_executor());
  const auto results = resolver.resolve(address.host, std::to_string(address.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service);
  const tcp::endpoint where = results.begin()->endpoint();
  acceptor.open(where.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(where);
  acceptor.listen(net::socket_base::max_listen_connections);
}

void log_failure::operator()(std::exception_ptr error) const {
  if (!error)
    return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    log->error("{} failed: {}", what, e.what());
  }
}

void client_server::listen(const endpoint& address) {
  open_listener(acceptor_, address);
}

void client_server::start() {
  net::co_spawn(io_, accept_loop(), log_failure{context_.log, "the client accept loop"});
}

void client_server::stop_accepting() {
  error_code_t ignored;
  acceptor_.close(ignored);
}

void client_server::drain() {
  for (const auto& session : std::unordered_set(sessions_))
    session->finish_and_close();
}

void client_server::stop() {
  stop_accepting();
  for (const auto& session : std::unordered_set(sessions_))
    session->close();
}

awaitable<void> client_server::accept_loop() {
  while (acceptor_.is_open()) {
    error_code_t ec;
    tcp::socket socket =
        co_await acceptor_.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open())
        co_return;
      // Out of descriptors and the like: keep serving the clients we have.
      context_.log->warn("accept failed: {}", ec.message());
      net::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    enable_keepalive(socket, context_.cfg.client_keepalive_s);
    if (sessions_.size() >= context_.cfg.max_connections) {
      // Tell the client why before closing; the line is small enough for a fresh socket buffer.
      // A TLS client could not read a plaintext line, and a handshake costs CPU we lack now.
      const std::string line =
          format_error(error_code::too_many, "too many connections (max_connections)");
      socket.non_blocking(true, ec);
      if (!tls_)
        socket.write_some(net::buffer(line), ec);
      else
        context_.log->debug("TLS client refused: too many connections (max_connections)");
      socket.close(ec);
      continue;
    }
    auto session =
        std::make_shared<client_session>(std::move(socket), *this, next_session_id_++, tls_.get());
    sessions_.insert(session);
    session->start();
  }
}

client_session::client_session(tcp::socket socket, client_server& server, std::uint64_t id,
                               tls_context* tls)
    : socket_(std::move(socket)),
      tls_(tls != nullptr ? std::make_unique<tls_stream>(socket_, *tls) : nullptr), server_(server),
      context_(server.context_), id_(id), lines_(server.context_.cfg.max_line_bytes),
      read_buffer_(read_chunk), resume_(socket_.get_executor()),
      partial_timer_(socket_.get_executor()), auth_(!server.context_.cfg.client_secret.empty()),
      auth_timer_(socket_.get_executor()) {
  error_code_t ec;
  const tcp::endpoint remote = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : endpoint{remote.address().to_string(), remote.port()}.to_string();
}

client_session::~client_session() = default;

void client_session::start() {
  watch_auth_deadline();
  net::co_spawn(socket_.get_executor(), read_requests(),
                [self = shared_from_this()](std::exception_ptr error) {
                  if (!error)
                    return;
                  try {
                    std::rethrow_exception(error);
                  } catch (const std::exception& e) {
                    self->context_.log->error("client {}: {}", self->id_, e.what());
                  }
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
  error_code_t ignored;
  if (graceful && tls_ready_) {
    // A clean end for TLS clients that insist on close_notify; the socket closes right after.
    tls_->async_close_notify(std::chrono::seconds(1), [self = shared_from_this()] {
      error_code_t ignored_too;
      self->socket_.close(ignored_too);
    });
  } else {
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  resume_.cancel();
  partial_timer_.cancel();
  auth_timer_.cancel();
  replies_.clear();
  pending_.clear();
  // Waiters leave their queues and KEEP locks are released on every node.
  if (used_engine_state_)
    context_.engine.client_gone(this);
  // Operations in flight keep this object alive through their sink and deliver into nothing.
  server_.sessions_.erase(shared_from_this());
}

awaitable<void> client_session::read_requests() {
  auto self = shared_from_this();
  if (tls_) {
    // Counted in max_connections from accept on; a silent or non-TLS peer is closed here.
    error_code_t ec;
    const auto peer = socket_.remote_endpoint(ec);
    co_await tls_->accept(std::chrono::milliseconds(context_.cfg.tls->handshake_timeout_ms), ec);
    if (ec) {
      if (!closed_)
        context_.log->warn("client {} from {}:{}: TLS handshake failed: {}", id_,
                           peer.address().to_string(), peer.port(), tls_->describe(ec));
      close();
      co_return;
    }
    tls_ready_ = true;
    context_.log->debug("client {}: TLS handshake done ({})", id_, tls_->summary());
  }
  while (!reading_done_ && !closed_) {
    error_code_t ec;
    while (backlogged() && !closed_) {
      resume_.expires_at(clock_type::time_point::max());
      co_await resume_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    if (closed_)
      co_return;
    const std::size_t n =
        tls_ ? co_await tls_->read_some(net::buffer(read_buffer_), ec)
             : co_await socket_.async_read_some(net::buffer(read_buffer_),
                                                net::redirect_error(net::use_awaitable, ec));
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
    lines_.feed({read_buffer_.data(), n});
    bool completed_line = false;
    std::string_view line;
    for (std::size_t handled = 1;; ++handled) {
      if (handled % lines_per_turn == 0) {
        co_await net::post(socket_.get_executor(), net::use_awaitable);
        while (backlogged() && !closed_) {
          resume_.expires_at(clock_type::time_point::max());
          co_await resume_.async_wait(net::redirect_error(net::use_awaitable, ec));
        }
        if (reading_done_ || closed_)
          break;
      }
      const auto status = lines_.next(line);
      if (status == line_splitter::status::need_more)
        break;
      if (status == line_splitter::status::too_long) {
        deliver(reserve_reply(),
                format_error(error_code::line_too_long,
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
    watch_partial_line(completed_line);
    finish_if_done();
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
    deliver(seq, format_error(error_code::noauth, "authentication required; send AUTH <secret>"));
    return;
  }
  // LOCK, UNLOCK and EXTEND replies are counted by outcome when they are written.
  const request& req_variant = std::get<request>(parsed);
  if (pending_reply* slot = reply_slot(seq)) {
    if (std::holds_alternative<lock_request>(req_variant))
      slot->counted = result_op::lock;
    else if (std::holds_alternative<unlock_request>(req_variant))
      slot->counted = result_op::unlock;
    else if (std::holds_alternative<extend_request>(req_variant))
      slot->counted = result_op::extend;
  }
  try {
    std::visit(
        [&](const auto& req) {
          using type = std::decay_t<decltype(req)>;
          if constexpr (std::is_same_v<type, ping_request>) {
            deliver(seq, format_pong(req.word));
          } else if constexpr (std::is_same_v<type, hello_request>) {
            deliver(seq, context_.hello_line);
          } else if constexpr (std::is_same_v<type, auth_request>) {
            handle_auth(seq, req.secret);
          } else if constexpr (std::is_same_v<type, lock_request>) {
            if (context_.shutting_down) {
              deliver(seq, format_error(error_code::shutting_down, "the daemon is stopping"));
              return;
            }
            if (req.wait_ms || req.keep)
              used_engine_state_ = true;
            context_.engine.lock(req, shared_from_this(), seq);
          } else if constexpr (std::is_same_v<type, unlock_request>) {
            context_.engine.unlock(req, shared_from_this(), seq);
          } else if constexpr (std::is_same_v<type, extend_request>) {
            context_.engine.extend(req, shared_from_this(), seq);
          } else if constexpr (std::is_same_v<type, status_request>) {
            if (context_.status == nullptr)
              deliver(seq, format_error(error_code::internal, "STATUS is not available"));
            else
              context_.status->query(req, shared_from_this(), seq);
          } else if constexpr (std::is_same_v<type, info_request>) {
            deliver(seq, format_info(context_.info_json()));
          } else if constexpr (std::is_same_v<type, quit_request>) {
            deliver(seq, format_ok());
            reading_done_ = true;
          }
        },
        std::get<request>(parsed));
  } catch (const std::exception& e) {
    context_.log->error("client {}: request failed: {}", id_, e.what());
    if (seq >= first_seq_ && seq - first_seq_ < replies_.size() &&
        !replies_[seq - first_seq_].ready())
      deliver(seq, format_error(error_code::internal, "internal error"));
  }
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
      pending_.append(head.grant->line);
    } else {
      if (head.counted)
        context_.results.add_reply(*head.counted, *head.line);
      pending_.append(*head.line);
    }
    pending_.append(head.pushes);
    replies_.pop_front();
    ++first_seq_;
  }
  schedule_flush();
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
  pending_.append(line);
  schedule_flush();
}

void client_session::schedule_flush() {
  if (flush_posted_ || write_in_progress_ || pending_.empty() || closed_)
    return;
  flush_posted_ = true;
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->write_pending();
  });
}

void client_session::write_pending() {
  if (write_in_progress_ || closed_)
    return;
  if (pending_.empty()) {
    finish_if_done();
    return;
  }
  writing_.swap(pending_);
  pending_.clear();
  write_in_progress_ = true;
  if (tls_) {
    tls_->async_write(net::buffer(writing_), [self = shared_from_this()](const error_code_t& ec) {
      self->on_written(ec);
    });
    return;
  }
  net::async_write(
      socket_, net::buffer(writing_),
      [self = shared_from_this()](const error_code_t& ec, std::size_t) { self->on_written(ec); });
}

void client_session::on_written(const error_code_t& ec) {
  write_in_progress_ = false;
  writing_.clear();
  if (ec) {
    close();
    return;
  }
  if (!backlogged())
    resume_.cancel();
  write_pending();
}

bool client_session::backlogged() const {
  return replies_.size() > max_pending_replies ||
         pending_.size() + writing_.size() > max_pending_bytes;
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

void client_session::handle_auth(std::uint64_t seq, std::string_view candidate) {
  // Compared with the secret configured now: SIGHUP may have replaced it since the accept.
  const auto outcome =
      auth_.attempt(candidate, context_.cfg.client_secret, context_.cfg.max_auth_failures);
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
    deliver(seq, format_error(error_code::auth_failed, "wrong secret"));
    return;
  }
  deliver(seq, format_error(error_code::auth_failed, "wrong secret; too many failures, closing"));
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
  if (!reading_done_ || closed_ || write_in_progress_ || flush_posted_ || !pending_.empty() ||
      !replies_.empty())
    return;
  close(true);
}

} // namespace redlockd
