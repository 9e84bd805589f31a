// STATUS <resource>: whether a resource is held, and for how long at least, read with PTTL from
// every master and decided from a majority. Separate from the lock engine: it only reads, takes
// part in no lock, and shares with the engine only the nodes' eligibility (a quarantined master
// may have lost keys, so its answer does not count). One thread, no I/O of its own.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/protocol/protocol.hpp"
#include "redlockd/resp/pipeline.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace redlockd {

// What the answers of the masters say. Over N masters with quorum Q = N/2+1, a LOCK succeeds
// when Q masters have no key and answers BUSY when more than N-Q hold it; STATUS says the same:
// - held: at least N-Q+1 answers hold the key (a LOCK now would be BUSY). `pttl_ms` is the
//   (N-Q+1)-th largest remaining TTL among the answers: until then at least N-Q+1 masters keep
//   the key whatever the silent ones hold, so it is a lower bound on the time left before a LOCK
//   could succeed (exact when every master answered and nobody extends);
// - free: at least Q answers have no key (a LOCK now could succeed);
// - noquorum: neither, because too few masters answered; `agreeing` is the larger of the two
//   counts, `needed` is Q.
struct status_verdict {
  enum class kind : std::uint8_t { free, held, noquorum };
  kind outcome = kind::noquorum;
  std::uint64_t pttl_ms = 0;
  std::size_t agreeing = 0;
  std::size_t needed = 0;
};

// One entry per master: std::nullopt when it did not answer (down, quarantined, timed out, an
// error), else its PTTL: -2 no key, -1 a key without expiry (held, time unknown: counted as 0),
// >= 0 the milliseconds left.
status_verdict decide_status(std::span<const std::optional<std::int64_t>> answers);

// What STATUS reports of a count (shared holders, permits in use): the (N-Q+1)-th largest
// among the masters that answered (`answers[i]` set), 0 when fewer answered. At least that many
// are held on N-Q+1 masters, enough to refuse a LOCK: a lower bound, as the time is.
std::uint64_t status_count(std::span<const std::optional<std::int64_t>> answers,
                           std::span<const std::uint64_t> counts);

// The label STATUS shows for a held resource: the one most masters that hold it store (the
// smallest on a tie; "" if none has one). `labels[i]` is master i's, read with answers[i].
std::string_view status_label(std::span<const std::optional<std::int64_t>> answers,
                              std::span<const std::string> labels);

class status_reader {
 public:
  using now_function = std::function<clock_type::time_point()>;
  using eligible_function = std::function<bool(std::size_t node)>;
  using arm_function = std::function<void(clock_type::time_point)>;

  // `io` sends to and tells about the masters; `eligible` says whether a master's vote counts
  // (the engine's view: connected and not quarantined); `arm` asks for on_timer() at a time.
  status_reader(const config& cfg, node_io& io, eligible_function eligible, arm_function arm,
                std::shared_ptr<spdlog::logger> log, now_function now = &clock_type::now);

  // The reply (OK FREE, OK HELD <ms>, NOQUORUM <agreeing> <needed>) goes to `sink` with `seq`,
  // possibly before returning.
  void query(const status_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  // A master answered a request_kind::status, or never will (its connection was lost).
  void on_reply(std::size_t node, const request_tag& tag, const script_reply& reply);
  void on_failure(std::size_t node, const request_tag& tag);
  // The time given to `arm` came.
  void on_timer();

  std::size_t in_flight() const { return in_flight_; }

 private:
  struct query_state {
    std::uint32_t generation = 1;
    bool active = false;
    clock_type::time_point started{};
    std::array<std::optional<std::int64_t>, max_nodes> answers{};
    std::array<std::string, max_nodes> labels{};
    std::array<std::uint64_t, max_nodes> readers{};
    std::array<std::uint64_t, max_nodes> permits_used{};
    std::array<std::uint64_t, max_nodes> permits{};
    std::size_t waiting = 0; // masters asked that have not answered
    std::shared_ptr<reply_sink> sink;
    std::uint64_t seq = 0;
  };
  void answer_one(std::uint32_t slot, std::size_t node, const pttl_reply* answer);
  void finish(std::uint32_t slot);

  const config& cfg_;
  node_io& io_;
  eligible_function eligible_;
  arm_function arm_;
  std::shared_ptr<spdlog::logger> log_;
  now_function now_;
  std::vector<query_state> slots_;
  std::vector<std::uint32_t> free_;
  std::size_t in_flight_ = 0;
  // Every query waits the same time, so deadlines come in the order they were set.
  std::deque<std::pair<clock_type::time_point, std::pair<std::uint32_t, std::uint32_t>>> deadlines_;
  std::uint32_t warned_ = 0; // masters whose error reply was logged at warn already
  std::string command_;
};

} // namespace redlockd
