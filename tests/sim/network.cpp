#include "network.hpp"

#include <algorithm>

namespace redlockd::sim {

network::network(scheduler& clock, prng random, std::size_t daemons, sim_time connect_timeout)
    : clock_(clock), random_(std::move(random)), daemons_(daemons, nullptr),
      connect_timeout_(connect_timeout) {
  connections_.emplace_back(); // id 0: no connection
}

void network::set_masters(std::vector<master*> masters) {
  masters_ = std::move(masters);
  latency_.assign(daemons_.size() * masters_.size(), {});
  blocked_.assign(daemons_.size() * masters_.size(), false);
  blackholed_.assign(daemons_.size() * masters_.size(), false);
  backlog_.assign(masters_.size(), {});
}

sim_time network::delay(const connection& c, bool to_daemon) {
  const latency_profile& p = latency_[c.info.daemon * masters_.size() + c.info.master];
  sim_time d =
      p.base_us + (p.jitter_us > 0 ? random_.exponential(static_cast<double>(p.jitter_us)) : 0);
  if (to_daemon)
    d += masters_[c.info.master]->reply_delay();
  return d;
}

void network::enqueue(connection& c, bool to_daemon, message m) {
  if (blackholed_[c.info.daemon * masters_.size() + c.info.master]) {
    c.broken = true; // into the blackhole
    return;
  }
  stream& s = to_daemon ? c.to_daemon : c.to_master;
  m.at = clock_.now() + delay(c, to_daemon);
  if (!s.queue.empty())
    m.at = std::max(m.at, s.queue.back().at); // in order, as TCP
  s.queue.push_back(std::move(m));
  schedule(c, to_daemon);
}

void network::schedule(connection& c, bool to_daemon) {
  stream& s = to_daemon ? c.to_daemon : c.to_master;
  if (s.scheduled || s.queue.empty() || partitioned(c.info.daemon, c.info.master))
    return; // a partition holds the stream; healing it schedules the head again
  s.scheduled = true;
  clock_.at(std::max(s.queue.front().at, clock_.now()), *this,
            to_daemon ? to_daemon_event : to_master_event, c.info.id);
}

void network::fire(std::uint32_t kind, std::uint64_t arg) {
  if (kind == connect_event) {
    const pending_connect pc = connects_[arg];
    master& m = *masters_[pc.master];
    if (!partitioned(pc.daemon, pc.master) && m.up()) {
      connection& c = connections_.emplace_back();
      c.info = {connections_.size() - 1, pc.daemon, pc.master, pc.kind, pc.token};
      c.incarnation = m.incarnation();
      daemons_[pc.daemon]->on_connected(c.info);
    } else {
      daemons_[pc.daemon]->on_connect_failed(pc.master, pc.kind, pc.token);
    }
    return;
  }
  connection* c = find(arg);
  if (c == nullptr)
    return;
  if (kind == to_master_event) {
    c->to_master.scheduled = false;
    deliver_to_master(*c);
  } else {
    c->to_daemon.scheduled = false;
    deliver_to_daemon(*c);
  }
}

void network::deliver_to_master(connection& c) {
  if (c.to_master.queue.empty() || partitioned(c.info.daemon, c.info.master))
    return;
  message m = std::move(c.to_master.queue.front());
  c.to_master.queue.pop_front();
  master& target = *masters_[c.info.master];
  if (c.master_open && target.up() && target.incarnation() == c.incarnation) {
    if (target.paused()) {
      backlog_[c.info.master].push_back({c.info.id, std::move(m.bytes), m.close});
    } else if (m.close) {
      c.master_open = false;
      target.disconnected(c.info.id);
    } else {
      run_on_master(c, m.bytes);
    }
  }
  schedule(c, false);
}

void network::run_on_master(connection& c, std::string_view bytes) {
  reply_.clear();
  masters_[c.info.master]->execute(c.info.id, bytes, reply_);
  if (!reply_.empty() && c.daemon_open && c.master_open)
    enqueue(c, true, {0, reply_, false});
}

void network::deliver_to_daemon(connection& c) {
  if (c.to_daemon.queue.empty() || partitioned(c.info.daemon, c.info.master))
    return;
  message m = std::move(c.to_daemon.queue.front());
  c.to_daemon.queue.pop_front();
  if (!c.daemon_open)
    return;
  if (m.close) {
    c.daemon_open = false;
    c.to_daemon.queue.clear();
    daemons_[c.info.daemon]->on_closed(c.info);
    return;
  }
  const connection_info info = c.info;
  daemons_[info.daemon]->on_bytes(info, m.bytes);
  schedule(c, true);
}

void network::connect(std::size_t daemon, std::size_t master, channel_kind kind,
                      std::uint64_t token) {
  const std::uint64_t index = connects_.size();
  connects_.push_back({daemon, master, kind, token});
  const latency_profile& p = latency_[daemon * masters_.size() + master];
  // A partition loses the SYN: the attempt runs into its timeout. Otherwise one round trip, to
  // an accept or (the master is down) a refusal.
  const sim_time after = partitioned(daemon, master) ? connect_timeout_ : 2 * p.base_us;
  clock_.after(after, *this, connect_event, index);
}

void network::send(std::uint64_t id, std::string bytes) {
  connection* c = find(id);
  if (c == nullptr || !c->daemon_open)
    return;
  enqueue(*c, false, {0, std::move(bytes), false});
}

void network::close_by_daemon(std::uint64_t id) {
  connection* c = find(id);
  if (c == nullptr || !c->daemon_open)
    return;
  c->daemon_open = false;
  c->to_daemon.queue.clear();
  if (c->master_open)
    enqueue(*c, false, {0, {}, true});
}

void network::truncate_randomly(stream& s) {
  std::size_t data = 0;
  for (const message& m : s.queue)
    data += m.close ? 0 : 1;
  const std::size_t keep = random_.below(data + 1);
  while (s.queue.size() > keep)
    s.queue.pop_back();
}

void network::daemon_crashed(std::size_t daemon) {
  for (connection& c : connections_) {
    if (c.info.id == 0 || c.info.daemon != daemon || !c.daemon_open)
      continue;
    truncate_randomly(c.to_master);
    close_by_daemon(c.info.id);
  }
}

void network::reset(std::uint64_t id) {
  connection* c = find(id);
  if (c == nullptr || !c->daemon_open)
    return;
  truncate_randomly(c->to_master);
  if (c->master_open)
    enqueue(*c, false, {0, {}, true});
  c->to_daemon.queue.clear();
  enqueue(*c, true, {0, {}, true});
}

void network::master_crashed(std::size_t master) {
  backlog_[master].clear();
  for (connection& c : connections_) {
    if (c.info.id == 0 || c.info.master != master || !c.master_open)
      continue;
    c.master_open = false;
    c.to_master.queue.clear();
    if (c.daemon_open)
      enqueue(c, true, {0, {}, true});
  }
}

void network::master_resumed(std::size_t master) {
  auto queued_up = std::move(backlog_[master]);
  backlog_[master].clear();
  for (queued& q : queued_up) {
    connection* c = find(q.connection);
    if (c == nullptr || !c->master_open)
      continue;
    if (q.close) {
      c->master_open = false;
      masters_[master]->disconnected(c->info.id);
    } else {
      run_on_master(*c, q.bytes);
    }
  }
}

void network::set_partitioned(std::size_t daemon, std::size_t master, bool partitioned,
                              bool blackhole) {
  const std::size_t pair = daemon * masters_.size() + master;
  blocked_[pair] = partitioned;
  blackholed_[pair] = partitioned && blackhole;
  for (connection& c : connections_) {
    if (c.info.id == 0 || c.info.daemon != daemon || c.info.master != master)
      continue;
    if (partitioned && blackhole) {
      c.broken = c.broken || !c.to_master.queue.empty() || !c.to_daemon.queue.empty();
      c.to_master.queue.clear();
      c.to_daemon.queue.clear();
    } else if (!partitioned && c.broken) {
      // The streams lost bytes: both ends find the connection dead.
      c.broken = false;
      if (c.master_open) {
        c.master_open = false;
        masters_[master]->disconnected(c.info.id);
      }
      if (c.daemon_open)
        enqueue(c, true, {0, {}, true});
    } else if (!partitioned) {
      schedule(c, false);
      schedule(c, true);
    }
  }
}

std::uint64_t network::connection_of(std::size_t daemon, std::size_t master,
                                     channel_kind kind) const {
  for (auto it = connections_.rbegin(); it != connections_.rend(); ++it)
    if (it->info.id != 0 && it->info.daemon == daemon && it->info.master == master &&
        it->info.kind == kind && it->daemon_open)
      return it->info.id;
  return 0;
}

void network::push(std::uint64_t id, std::string bytes) {
  connection* c = find(id);
  if (c == nullptr || !c->daemon_open || !c->master_open)
    return;
  enqueue(*c, true, {0, std::move(bytes), false});
}

} // namespace redlockd::sim
