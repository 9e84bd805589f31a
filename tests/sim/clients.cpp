#include "clients.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

namespace redlockd::sim {
namespace {

std::string_view word(std::string_view& line) {
  while (!line.empty() && line.front() == ' ')
    line.remove_prefix(1);
  const std::size_t end = std::min(line.find_first_of(" \n"), line.size());
  const std::string_view out = line.substr(0, end);
  line.remove_prefix(end);
  return out;
}

std::int64_t number(std::string_view text) {
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

owner_id owner_of(std::string_view text) {
  owner_id owner{};
  std::copy_n(text.begin(), std::min(text.size(), owner.size()), owner.begin());
  return owner;
}

} // namespace

sim_client::sim_client(std::uint32_t id, client_world& world, prng random, const workload& w)
    : id_(id), world_(world), random_(std::move(random)), w_(w) {}

void sim_client::start(sim_time at) {
  ++act_generation_;
  world_.clock().at(at, *this, 0, act_generation_);
}

void sim_client::schedule_act(sim_time after) {
  ++act_generation_;
  world_.clock().after(after, *this, 0, act_generation_);
}

void sim_client::fire(std::uint32_t, std::uint64_t arg) {
  if (arg == act_generation_)
    act();
}

bool sim_client::connect() {
  sim_daemon* d = world_.pick_daemon(random_);
  if (d == nullptr)
    return false;
  history& h = world_.records();
  connection_ = static_cast<std::uint32_t>(h.connections.size());
  h.connections.push_back({id_, static_cast<std::uint32_t>(d->index()), world_.clock().now(), -1});
  daemon_ = static_cast<std::uint32_t>(d->index());
  instance_ = d->instance();
  session_ = d->open_session(*this, connection_);
  return true;
}

void sim_client::end_keep_locks(sim_time at) {
  history& h = world_.records();
  if (connection_ != none)
    h.connections[connection_].ended = at;
  std::erase_if(holding_, [&](const held& x) {
    request_record& g = h.requests[x.request];
    if (!g.keep || x.connection != connection_)
      return false;
    g.connection_ended = at;
    return true;
  });
  outstanding_.clear();
  session_.reset();
  connection_ = none;
}

void sim_client::disconnect() {
  if (session_)
    session_->close();
  end_keep_locks(world_.clock().now());
}

void sim_client::on_connection_lost() {
  end_keep_locks(world_.clock().now());
  schedule_act(random_.exponential(static_cast<double>(w_.think_mean)));
}

std::uint32_t sim_client::pick_resource() {
  if (w_.p_lost > 0 && random_.chance(w_.p_lost)) {
    const std::vector<std::uint32_t> lost = world_.recently_lost();
    if (!lost.empty())
      return lost[random_.below(lost.size())];
  }
  if (w_.cold_resources == 0 || random_.chance(w_.p_hot))
    return static_cast<std::uint32_t>(random_.below(w_.hot_resources));
  return w_.hot_resources + static_cast<std::uint32_t>(random_.below(w_.cold_resources));
}

std::uint32_t sim_client::issue(request_record r, const std::string& line) {
  history& h = world_.records();
  const auto index = static_cast<std::uint32_t>(h.requests.size());
  r.client = id_;
  r.connection = connection_;
  r.daemon = daemon_;
  r.daemon_instance = instance_;
  r.invoke = world_.clock().now();
  h.requests.push_back(std::move(r));
  outstanding_.push_back(index);
  // The session may answer at once (on_reply fills the record in then).
  const std::shared_ptr<sim_session> session = session_;
  session->request(index, line, world_.limits());
  return index;
}

std::string sim_client::name_members(request_record& r, std::span<const std::uint32_t> members) {
  const history& h = world_.records();
  r.member_count = static_cast<std::uint8_t>(members.size());
  std::copy(members.begin(), members.end(), r.members.begin());
  for (std::size_t i = members.size(); i > 1; --i) // any order: the engine sorts them
    std::swap(r.members[i - 1], r.members[random_.below(i)]);
  r.resource = r.members[0];
  std::string names = std::to_string(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    names += " " + h.resources[r.members[i]];
  return names;
}

void sim_client::lock_something() {
  const history& h = world_.records();
  const sim_time now = world_.clock().now();
  const int count = random_.chance(w_.p_pipeline) ? static_cast<int>(random_.between(2, 3)) : 1;
  for (int i = 0; i < count && session_; ++i) {
    request_record r;
    r.kind = client_op::lock;
    r.ttl_ms = static_cast<std::uint64_t>(random_.log_between(
        static_cast<std::int64_t>(w_.ttl_min_ms), static_cast<std::int64_t>(w_.ttl_max_ms)));
    const double kind = random_.unit();
    std::string line;
    if (kind < w_.p_shared) {
      r.hold = hold_kind::shared;
      r.resource = pick_resource();
      line = "LOCK " + h.resources[r.resource] + " " + std::to_string(r.ttl_ms) + " SHARED";
    } else if (kind < w_.p_shared + w_.p_permit && !w_.permits.empty()) {
      r.hold = hold_kind::permit;
      const auto semaphore = static_cast<std::uint32_t>(random_.below(w_.permits.size()));
      r.resource = w_.hot_resources + w_.cold_resources + semaphore;
      r.permits = w_.permits[semaphore];
      // Now and then, while holding one of its permits (so its n is in force): another n,
      // which must be refused PERMITS_MISMATCH and change nothing.
      const bool holds_one = std::any_of(holding_.begin(), holding_.end(), [&](const held& x) {
        const request_record& g = h.requests[x.request];
        return g.hold == hold_kind::permit && g.resource == r.resource &&
               g.reply + g.validity_ms * 1000 > now + 200'000;
      });
      if (holds_one && random_.chance(w_.p_wrong_permits)) {
        r.permits = r.permits > 1 && random_.chance(0.5) ? r.permits - 1 : r.permits + 1;
        r.ttl_ms = w_.ttl_min_ms;
        issue(r, "LOCK " + h.resources[r.resource] + " " + std::to_string(r.ttl_ms) + " PERMITS " +
                     std::to_string(r.permits));
        continue;
      }
      line = "LOCK " + h.resources[r.resource] + " " + std::to_string(r.ttl_ms) + " PERMITS " +
             std::to_string(r.permits);
    } else if (kind < w_.p_shared + w_.p_permit + w_.p_set && w_.hot_resources >= 2) {
      r.hold = hold_kind::multi;
      std::array<std::uint32_t, max_members> hot{};
      const auto size = static_cast<std::size_t>(
          random_.between(2, std::min<std::int64_t>({w_.set_max, w_.hot_resources, max_members})));
      // `size` of the hot resources, each once.
      std::vector<std::uint32_t> all(w_.hot_resources);
      for (std::uint32_t k = 0; k < w_.hot_resources; ++k)
        all[k] = k;
      for (std::size_t k = 0; k < size; ++k) {
        std::swap(all[k], all[k + random_.below(all.size() - k)]);
        hot[k] = all[k];
      }
      line = "MLOCK " + name_members(r, {hot.data(), size}) + " " + std::to_string(r.ttl_ms);
    } else {
      r.resource = pick_resource();
      line = "LOCK " + h.resources[r.resource] + " " + std::to_string(r.ttl_ms);
    }
    if (random_.chance(w_.p_wait)) {
      r.wait_ms = random_.log_between(static_cast<std::int64_t>(w_.wait_min_ms),
                                      static_cast<std::int64_t>(w_.wait_max_ms));
      line += " WAIT " + std::to_string(r.wait_ms);
    }
    r.keep = random_.chance(w_.p_keep);
    if (r.keep)
      line += " KEEP";
    issue(r, line);
  }
}

std::pair<request_record, std::string> sim_client::release_or_extend(held& x) {
  const history& h = world_.records();
  const request_record& g = h.requests[x.request];
  request_record r;
  r.resource = g.resource;
  r.owner = g.owner;
  r.lock = x.request;
  const std::string owner(view(g.owner));
  const bool whole = g.hold != hold_kind::multi || x.members_left == (1u << g.member_count) - 1;
  if (!g.keep && whole && x.extends < 2 && !world_.stopping() && random_.chance(w_.p_extend)) {
    ++x.extends;
    r.kind = client_op::extend;
    r.ttl_ms = g.ttl_ms;
    if (g.hold == hold_kind::multi)
      return {r, "MEXTEND " + name_members(r, resources_of(g)) + " " + owner + " " +
                     std::to_string(g.ttl_ms)};
    return {r, "EXTEND " + h.resources[g.resource] + " " + owner + " " + std::to_string(g.ttl_ms)};
  }
  r.kind = client_op::unlock;
  if (g.hold != hold_kind::multi)
    return {r, "UNLOCK " + h.resources[g.resource] + " " + owner};
  std::array<std::uint32_t, max_members> left{};
  std::size_t count = 0;
  for (std::size_t k = 0; k < g.member_count; ++k)
    if ((x.members_left >> k & 1) != 0)
      left[count++] = g.members[k];
  if (count > 1 && random_.chance(w_.p_unlock_member)) {
    // One member by UNLOCK with the set's owner; the rest when it is answered.
    r.resource = left[random_.below(count)];
    return {r, "UNLOCK " + h.resources[r.resource] + " " + owner};
  }
  return {r, "MUNLOCK " + name_members(r, {left.data(), count}) + " " + owner};
}

void sim_client::act() {
  if (!session_ || !session_->open()) {
    if (world_.stopping() && holding_.empty())
      return;
    if (!connect()) {
      schedule_act(random_.exponential(50'000));
      return;
    }
  }
  if (!outstanding_.empty())
    return; // the last reply acts again
  const history& h = world_.records();
  const sim_time now = world_.clock().now();
  if (!world_.stopping() && random_.chance(w_.p_disconnect)) {
    disconnect();
    schedule_act(random_.exponential(static_cast<double>(w_.think_mean)));
    return;
  }
  // Locks due: UNLOCK (or EXTEND) them. Chosen first and sent after, since a reply may come at
  // once and change what this client holds.
  std::vector<std::pair<request_record, std::string>> due;
  sim_time next_due = -1;
  for (held& x : holding_) {
    const request_record& g = h.requests[x.request];
    if (x.abandoned && !g.keep && x.release_at <= now)
      continue; // forgotten below: its key expires
    if (x.release_at > now || (x.abandoned && !world_.stopping())) {
      if (!x.abandoned)
        next_due = next_due < 0 ? x.release_at : std::min(next_due, x.release_at);
      continue;
    }
    x.release_at = std::numeric_limits<sim_time>::max(); // until its reply
    due.push_back(release_or_extend(x));
  }
  std::erase_if(holding_, [&](const held& x) {
    return x.abandoned && !h.requests[x.request].keep && x.release_at <= now;
  });
  for (const auto& [r, line] : due)
    if (session_)
      issue(r, line);
  if (!due.empty() || !session_)
    return;
  if (world_.stopping()) {
    if (next_due >= 0)
      schedule_act(next_due - now);
    return;
  }
  if (holding_.size() < 3) {
    lock_something();
    if (outstanding_.empty() && session_)
      schedule_act(random_.exponential(static_cast<double>(w_.think_mean)));
    return;
  }
  if (next_due >= 0)
    schedule_act(next_due - now);
}

void record_reply(request_record& r, std::string_view line, sim_time now) {
  r.reply = now;
  std::string_view rest = line;
  const std::string_view status = word(rest);
  if (status == "OK") {
    r.result = outcome::ok;
    if (r.kind == client_op::lock) {
      r.owner = owner_of(word(rest));
      r.fence = static_cast<std::uint64_t>(number(word(rest)));
      r.validity_ms = number(word(rest));
    } else if (r.kind == client_op::extend) {
      r.validity_ms = number(word(rest));
    }
  } else if (status == "BUSY") {
    r.result = outcome::busy;
  } else if (status == "NOQUORUM") {
    r.result = outcome::noquorum;
  } else if (status == "NOTHELD") {
    r.result = outcome::notheld;
  } else if (status == "ERR" && word(rest) == "PERMITS_MISMATCH") {
    r.result = outcome::permits_mismatch;
  } else {
    r.result = outcome::error;
  }
}

void sim_client::on_reply(std::uint32_t record, std::string_view line) {
  history& h = world_.records();
  const sim_time now = world_.clock().now();
  if (!outstanding_.empty() && outstanding_.front() == record)
    outstanding_.pop_front();
  request_record& r = h.requests[record];
  record_reply(r, line, now);

  const auto hold_for = [&](std::int64_t validity_ms, bool keep, std::uint64_t ttl_ms) {
    if (keep)
      return random_.between(0, static_cast<std::int64_t>(ttl_ms) * 3000);
    return static_cast<sim_time>(random_.unit() * w_.hold_max * static_cast<double>(validity_ms) *
                                 1000.0);
  };
  switch (r.kind) {
  case client_op::lock:
    if (r.result == outcome::ok) {
      world_.granted(record);
      held x{record, connection_, now + hold_for(r.validity_ms, r.keep, r.ttl_ms)};
      x.abandoned = random_.chance(w_.p_abandon);
      x.members_left = static_cast<std::uint8_t>((1u << r.member_count) - 1);
      holding_.push_back(x);
    }
    break;
  case client_op::unlock:
    std::erase_if(holding_, [&](held& x) {
      if (x.request != r.lock)
        return false;
      // A set's members released so far; the rest go at once.
      const request_record& g = h.requests[x.request];
      for (std::size_t k = 0; k < g.member_count; ++k)
        for (const std::uint32_t named : resources_of(r))
          if (g.members[k] == named)
            x.members_left = static_cast<std::uint8_t>(x.members_left & ~(1u << k));
      x.release_at = now;
      return x.members_left == 0;
    });
    break;
  case client_op::extend:
    for (held& x : holding_)
      if (x.request == r.lock)
        x.release_at = r.result == outcome::ok ? now + hold_for(r.validity_ms, false, 0) : now;
    if (r.result == outcome::ok)
      world_.extended(record);
    break;
  }
  if (outstanding_.empty())
    schedule_act(random_.exponential(static_cast<double>(w_.think_mean)));
}

void sim_client::on_extra_reply(std::uint32_t record) {
  ++world_.records().requests[record].extra_replies;
}

void sim_client::on_push(std::string_view line) {
  history& h = world_.records();
  std::string_view rest = line;
  if (word(rest) != "LOST")
    return;
  const std::string_view resource = word(rest);
  const owner_id owner = owner_of(word(rest));
  const sim_time now = world_.clock().now();
  for (auto it = holding_.begin(); it != holding_.end(); ++it) {
    request_record& g = h.requests[it->request];
    if (g.keep && g.owner == owner) {
      g.lost = now;
      holding_.erase(it);
      return;
    }
  }
  // A LOST about a KEEP lock this client has released already (a set whose member it unlocked
  // first: its renewal found the set broken) is about no lock it holds.
  for (const request_record& g : h.requests)
    if (g.client == id_ && g.kind == client_op::lock && g.result == outcome::ok &&
        g.owner == owner) {
      return;
    }
  // A LOST for no lock this client was granted: pin it on the KEEP LOCK it must be about.
  for (auto it = outstanding_.rbegin(); it != outstanding_.rend(); ++it) {
    request_record& r = h.requests[*it];
    if (r.kind == client_op::lock && r.keep && h.resources[r.resource] == resource) {
      r.lost = now;
      r.lost_before_ok = true;
      return;
    }
  }
}

void sim_client::on_grant_expired(std::uint32_t record, std::string_view granted_line) {
  const history& h = world_.records();
  if (h.requests[record].kind != client_op::lock)
    return;
  std::string_view rest = granted_line;
  word(rest); // OK
  world_.grant_unseen(record, owner_of(word(rest)));
}

// ---------------------------------------------------------------------------------------------
// scripted_client

std::uint32_t scripted_client::send(sim_daemon& d, request_record r, const std::string& line) {
  history& h = world_.records();
  if (!session_ || !session_->open()) {
    connection_ = static_cast<std::uint32_t>(h.connections.size());
    h.connections.push_back({id_, static_cast<std::uint32_t>(d.index()), world_.clock().now(), -1});
    session_ = d.open_session(*this, connection_);
  }
  const auto index = static_cast<std::uint32_t>(h.requests.size());
  r.client = id_;
  r.connection = connection_;
  r.daemon = static_cast<std::uint32_t>(d.index());
  r.daemon_instance = d.instance();
  r.invoke = world_.clock().now();
  h.requests.push_back(r);
  const std::shared_ptr<sim_session> session = session_;
  session->request(index, line, world_.limits());
  return index;
}

void scripted_client::on_reply(std::uint32_t record, std::string_view line) {
  request_record& r = world_.records().requests[record];
  record_reply(r, line, world_.clock().now());
  if (r.result == outcome::ok && r.kind == client_op::lock)
    world_.granted(record);
  if (r.result == outcome::ok && r.kind == client_op::extend)
    world_.extended(record);
}

void scripted_client::on_extra_reply(std::uint32_t record) {
  ++world_.records().requests[record].extra_replies;
}

void scripted_client::on_push(std::string_view line) {
  std::string_view rest = line;
  if (word(rest) != "LOST")
    return;
  word(rest);
  const owner_id owner = owner_of(word(rest));
  for (request_record& r : world_.records().requests)
    if (r.connection == connection_ && r.kind == client_op::lock && r.owner == owner)
      r.lost = world_.clock().now();
}

void scripted_client::on_connection_lost() {
  history& h = world_.records();
  if (connection_ != none)
    h.connections[connection_].ended = world_.clock().now();
  session_.reset();
}

void scripted_client::on_grant_expired(std::uint32_t record, std::string_view granted_line) {
  std::string_view rest = granted_line;
  word(rest);
  world_.grant_unseen(record, owner_of(word(rest)));
}

} // namespace redlockd::sim
