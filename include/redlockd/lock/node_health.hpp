// Which masters' votes count. A master that may have lost locks (a restart, a lost key, a
// forward clock jump) is quarantined for the longest TTL a majority of the other masters
// recorded, then re-seeded with their largest fence before it votes again; a mark this daemon
// sets on it when the quarantine starts must still be there then, or it lost data again during
// the quarantine and the quarantine starts over; no master votes until
// a majority of masters that kept their data has been read. Every decision here uses what a
// majority of the masters holds, never only what this daemon saw. No I/O: requests go out
// through node_io, deadlines through the callback.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/engine_io.hpp"
#include "redlockd/lock/fencing.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace redlockd {

// What a link read from a master when it connected, before the master takes requests.
struct node_facts {
  std::optional<std::uint64_t> fence; // its fencing counter; nullopt: the key is missing
  std::uint64_t max_ttl_ms = 0;       // its record of the longest TTL granted on the fleet
  std::string_view run_id;
  std::uint64_t uptime_ms = 0;
};

enum class quarantine_reason : std::uint8_t { none, restart, keyloss, clock };

struct node_status {
  quarantine_reason reason = quarantine_reason::none;
  std::int64_t remaining_ms = 0;
};

class node_health {
 public:
  using now_function = std::function<clock_type::time_point()>;
  // Asks for node_timer(node) at `when`, if `stamp` is still the node's read generation then.
  using deadline_function =
      std::function<void(clock_type::time_point when, std::uint32_t node, std::uint64_t stamp)>;

  node_health(const config& cfg, node_io& io, spdlog::logger& log, const now_function& now,
              fence_register& fences, engine_counters& counters, const register_keys& keys,
              std::string_view daemon_id, deadline_function add_deadline);

  // A master connected (see lock_engine::on_node_connected).
  void on_connected(std::size_t node, const node_facts& facts);
  // A master's handshake ended: it takes requests (fleet reads it was not asked in go again).
  void on_ready(std::size_t node);
  // A TIME sample (see lock_engine::on_node_time). False: the node was quarantined for it.
  bool on_time(std::size_t node, const node_time& time, clock_type::time_point sent_at);
  // A master that granted a still-valid lock says its key is gone.
  void key_lost(std::size_t node);

  // Answers to the fleet read for `tag.op` (nullptr: an error or a lost connection), and to the
  // seed sent to `node`.
  void on_register_read(std::size_t answering, const request_tag& tag, const register_reply* reply);
  void on_seed_reply(std::size_t node, const request_tag& tag, const script_reply& reply);
  void on_mark_reply(std::size_t node, const request_tag& tag, const script_reply& reply);
  void on_seed_lost(const request_tag& tag);
  void on_mark_lost(const request_tag& tag);
  void on_timer(std::size_t node);
  bool timer_stale(std::size_t node, std::uint64_t stamp) const {
    return nodes_[node].read_generation != stamp;
  }

  bool started() const { return started_; }
  bool trusted(std::size_t node) const { return nodes_[node].state == trust::trusted; }
  node_status status_of(std::size_t node) const;

  // The masters' clock now, in µs: the time that a majority of the trusted masters have reached
  // by their last TIME samples (each carried on by this daemon's clock since). The floor of
  // fencing proposals (fencing.hpp): every daemon reads the same masters, so their proposals
  // follow one clock. nullopt without samples of a majority, or beyond 2^53 (clocks set far
  // ahead: the clock alone never takes tokens past what a double holds exactly).
  std::optional<std::uint64_t> fleet_time_us() const;

  // The longest TTL known on the fleet: granted here or read from the masters.
  std::uint64_t max_ttl() const { return max_ttl_; }
  // A TTL a quorum granted or extended to through this daemon (never one that was refused):
  // the bounds above follow it.
  void granting(std::uint64_t ttl_ms);

 private:
  enum class trust : std::uint8_t { unknown, trusted, quarantined, reseeding };
  struct time_sample {
    std::int64_t node_us;            // the node's TIME
    clock_type::time_point sent;     // when its request was sent
    clock_type::time_point received; // when its reply was handled
  };
  struct node_record {
    std::string run_id;
    trust state = trust::unknown;
    std::optional<node_facts> pending; // read before the fleet was known; judged at start
    std::string pending_run_id;        // pending->run_id points here
    clock_type::time_point lost_since{};
    clock_type::time_point quarantined_until{}; // a lower bound until the fleet read is done
    quarantine_reason reason = quarantine_reason::none;
    // The fleet read for this node: answers from the other masters.
    std::uint32_t read_generation = 0;
    bool read_done = false;
    std::size_t read_sent = 0;
    std::size_t read_answers = 0;         // answers and failures
    std::size_t read_trusted_answers = 0; // answers from trusted masters
    std::size_t read_without_fence = 0;   // answers of masters without a fence register
    std::size_t read_with_fence = 0;      // answers of masters with one, trusted or not
    std::uint32_t read_asked = 0;         // the masters asked, as a bit set
    std::uint32_t read_answered = 0;      // the masters that answered, as a bit set
    std::uint64_t read_fence = 0;
    std::uint64_t read_max_ttl = 0;
    bool read_found_empty = false; // the last read: a majority had no register (a new fleet)
    std::uint64_t seed_fence = 0;  // the fence of the seed in flight
    // The fence this daemon seeded it with after a read that found a majority without a
    // register, while it has not been quarantined since: a register that still holds exactly
    // that carries no history of its own (on_register_read).
    std::optional<std::uint64_t> empty_seed;
    bool seed_in_flight = false;
    bool marked = false; // this quarantine's mark was set on the node (an answer came)
    // The quarantine a 'mark' answer belongs to: fleet reads restart read_generation, and the
    // answer of a mark sent at a reconnection must still count (it may say the mark was gone).
    std::uint32_t mark_generation = 0;
    // Marks sent and not answered (nor failed with their connection): no other is sent beside
    // one, which could set the mark again after a loss that the first answer came before (a
    // review: the timer sent a second 'mark' while the first was slow).
    std::uint32_t marks_out = 0;
    std::optional<time_sample> clock; // the last TIME sample
    bool clock_carried = false;       // it came from an earlier connection (to the same run)
  };

  void try_start();
  void judge(std::size_t node, const node_facts& facts);
  // The node may have lost locks since `since`: it stops voting, and its quarantine is sized
  // from the longest TTL a majority of the other masters recorded.
  void quarantine(std::size_t node, quarantine_reason reason, clock_type::time_point since);
  void start_fleet_read(std::size_t node);
  void fleet_read_done(std::size_t node);
  void send_seed(std::size_t node);
  // How long a quarantine mark lives: past the quarantine comfortably.
  std::uint64_t mark_life_ms() const { return 2 * max_ttl_ + 60'000; }
  void send_mark(std::size_t node);
  void maybe_seed(std::size_t node);
  std::int64_t clock_jump_bound_us() const;
  std::chrono::microseconds drift_of_max_ttl() const;
  clock_type::time_point retry_at() const; // when an unanswered read or a failed seed goes again

  const config& cfg_;
  node_io& io_;
  spdlog::logger& log_;
  const now_function& now_;
  fence_register& fences_;
  engine_counters& counters_;
  const register_keys& keys_;
  deadline_function add_deadline_;
  std::size_t node_count_;
  std::array<node_record, max_nodes> nodes_{};
  bool started_ = false; // the fleet's registers are known from a majority
  std::uint64_t max_ttl_ = 0;
  std::uint64_t min_ttl_ = 0; // shortest TTL granted here; 0: none yet
  std::string command_;
  std::string mark_key_; // fence_key + ":quarantine:" + this daemon's id
};

} // namespace redlockd
