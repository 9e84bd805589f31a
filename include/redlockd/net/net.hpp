// Asio shim: include this before any other Boost.Asio header.
#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (fixed upstream in
// Asio 1.22.1). Clang builds also need BOOST_ASIO_HAS_CO_AWAIT, set by CMake.
// clang-format off
#include <utility>
// clang-format on

#include "redlockd/config/endpoint.hpp"

#include <boost/version.hpp>
#if defined(BOOST_ASIO_HAS_IO_URING) && BOOST_VERSION < 107800
#error "REDLOCKD_ASIO_IO_URING needs Boost >= 1.78: these headers are older (check Boost_ROOT)"
#endif

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <exception>
#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace redlockd {
namespace net = boost::asio;
using tcp = net::ip::tcp;
// A connected stream socket of any family: TCP, or a Unix-domain socket for local clients. A
// tcp::socket converts into one by move; TCP-only options still apply to it.
using stream_socket = net::generic::stream_protocol::socket;
using error_code_t = boost::system::error_code;
template <typename T = void>
using awaitable = net::awaitable<T>;

// Resolves `address`, then opens, binds (SO_REUSEADDR) and listens. Throws on failure.
void open_listener(tcp::acceptor& acceptor, const endpoint& address);

// The completion handler of every co_spawn: logs what the coroutine threw. (Asio 1.18's
// `detached` would drop the exception silently.)
struct log_failure {
  std::shared_ptr<spdlog::logger> log;
  std::string what;
  void operator()(std::exception_ptr error) const;
};

} // namespace redlockd
