// Per-node pipeline bookkeeping: which reply answers which request. No I/O.
//
// Requests written to one connection are answered in order, so a FIFO of tags is enough. A
// request that timed out keeps its slot: its late reply is still matched here and then
// discarded by whoever owns the tag (the operation's generation no longer matches).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace redlockd {

// What a reply on a node connection is for.
enum class request_kind : std::uint8_t {
  // Sent by the lock engine on behalf of an operation.
  acquire,
  acquire_slot, // a permit's acquire: its reply carries the slot it took
  release,
  extend,
  fence_bump,
  hand_over,       // an UNLOCK's lock handed to the head waiter; op: the UNLOCK's operation
  fleet_read,      // MGET of the fence and longest-TTL registers; op: the node being judged
  seed,            // raises a re-admitted node's registers; op: that node
  quarantine_mark, // sets this daemon's mark on a quarantined node (seed.lua); op: that node
  cleanup,         // a release nobody waits for; op: its entry in the engine's cleanup table
  unmark,          // a daemon's entry taken out of a wait marker; nobody waits for the answer
  wake_yielded,    // heads woken beside a granted reader or permit; nobody waits for the answer
  // Sent by the status reader (STATUS): a plain PTTL.
  status,
  // Sent by the lock operator (lock_operator.hpp): BREAK's deletion, one step of LIST's SCAN.
  break_hold,
  list_step,
  // Sent by the connection itself: the handshake (see link_handshake.hpp) ...
  auth,
  load_script,  // op: the script's index
  read_fence,   // GET of the fence key
  read_max_ttl, // GET of the fence key's ":max_ttl" register
  info_server,  // INFO server: run_id, uptime
  info_memory,  // INFO memory persistence: maxmemory_policy, aof_enabled
  // ... and afterwards.
  reload_script, // SCRIPT LOAD again after NOSCRIPT; op: the script's index
  ping,          // TIME, the health probe
};

struct request_tag {
  request_kind kind = request_kind::ping;
  std::uint32_t op = 0;         // operation slot in the engine, or script index for (re)loads
  std::uint32_t generation = 0; // the slot's generation when sent; 0 = nobody waits
};

class pipeline {
 public:
  void push(const request_tag& tag) { in_flight_.push_back(tag); }
  bool empty() const { return in_flight_.empty(); }
  std::size_t size() const { return in_flight_.size(); }
  // The tag a reply that just arrived answers. Precondition: !empty().
  request_tag pop() {
    request_tag tag = in_flight_.front();
    in_flight_.pop_front();
    return tag;
  }
  // The connection was lost: hands every outstanding tag to `fail`, oldest first, and empties.
  template <typename F>
  void fail_all(F&& fail) {
    while (!in_flight_.empty()) {
      request_tag tag = in_flight_.front();
      in_flight_.pop_front();
      fail(tag);
    }
  }

 private:
  std::deque<request_tag> in_flight_;
};

} // namespace redlockd
