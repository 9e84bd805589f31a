// Releases nobody waits for (a failed acquisition, a lost or abandoned KEEP lock, masters that
// did not vote in an UNLOCK). Each is tracked until every master it went to answered: NOSCRIPT
// gets a resend by source, and a master whose link was down gets it when it is back, until the
// key would have expired anyway. The release of a lock this daemon granted judges key loss as
// an UNLOCK does (key_loss.hpp). No I/O: commands go out through node_io.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/engine_io.hpp"
#include "redlockd/lock/key_loss.hpp"
#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/owner.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace redlockd {

// What a release nobody waits for releases: an attempt that was never granted (a failed LOCK),
// whose release wakes nobody; a failed attempt that set its key on a majority all the same (too
// late, or beaten by a fence), which refused others as a holder does and so wakes them as a
// holder's release would; or a lock that was granted (a KEEP lock that ended, a grant nobody
// took, an UNLOCK's master that could not vote), whose release may wake other daemons' waiters.
// An attempt's permit may sit on any slot of its semaphore: its release looks for it there.
enum class released : std::uint8_t { attempt, attempt_held, lock };

class release_cleanups {
 public:
  // Called with the masters a release found without the key of a lock that was still valid.
  using key_lost_function = std::function<void(std::uint32_t masters, std::string_view key)>;

  // `wake`: the engine's release_wake, which the releases of granted holds pass (release.lua).
  release_cleanups(node_io& io, std::size_t nodes, const register_keys& keys, std::string_view wake,
                   key_lost_function key_lost)
      : io_(io), node_count_(nodes), keys_(keys), wake_(wake), key_lost_(std::move(key_lost)) {}

  // Releases (key, owner) on every master but those in `spared` (masters that answered that they
  // did not set it), also those that did not answer (their SET may have happened after all).
  // `expect`: where and until when the lock was known to be held (expect_held, expect_until),
  // for a lock this daemon granted.
  void everywhere(const hold_target& hold, const owner_id& owner, clock_type::time_point expires,
                  released what, const lease_watch& expect = {}, std::uint32_t spared = 0);
  // Releases it on one master only.
  void on(std::size_t node, const hold_target& hold, const owner_id& owner,
          clock_type::time_point expires, released what);
  // The answer to one (nullptr: the connection was lost), handled at `now`.
  void on_reply(std::size_t node, const request_tag& tag, const script_reply* reply,
                clock_type::time_point now);
  // The link is back: what it missed goes out now.
  void on_node_ready(std::size_t node, clock_type::time_point now);

 private:
  struct entry {
    std::string key; // the hold's name
    lock_kind kind = lock_kind::exclusive;
    std::uint32_t permits = 0;
    owner_id owner{};
    clock_type::time_point expires{};
    released what = released::attempt;
    lease_watch watch;      // key-loss detection: expected, and the masters that said gone
    std::size_t found = 0;  // masters that still held it (and released it)
    std::uint32_t refs = 0; // replies and owed sends still to come
  };

  std::uint32_t add(const hold_target& hold, const owner_id& owner, clock_type::time_point expires,
                    released what);
  void format(std::uint32_t index, script_by by); // into command_
  void send(std::size_t node, std::uint32_t index);
  void owe(std::size_t node, std::uint32_t index);
  void unref(std::uint32_t index);
  void free_if_unused(std::uint32_t index);

  node_io& io_;
  std::size_t node_count_;
  const register_keys& keys_;
  std::string_view wake_;
  key_lost_function key_lost_;
  std::vector<entry> entries_;
  std::vector<std::uint32_t> free_;
  std::array<std::vector<std::uint32_t>, max_nodes> owed_{}; // per node, to send again
  std::string command_;
  std::string scratch_; // the entry's wait marker, while command_ is formatted
};

} // namespace redlockd
