// What every listener and coroutine of the daemon shares (declared in net.hpp): opening a
// listening socket and logging what a spawned coroutine threw.
#include "redlockd/net/net.hpp"

#include <spdlog/spdlog.h>

namespace redlockd {

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

} // namespace redlockd
