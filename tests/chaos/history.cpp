#include "history.hpp"

#include <algorithm>
#include <climits>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace redlockd::chaos {
namespace {

constexpr std::size_t max_examples = 5;

std::string ms_text(std::int64_t ns) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(3);
  out << static_cast<double>(ns) / 1e9 << "s";
  return out.str();
}

// A successful LOCK and the part of its lease the client could be sure of.
struct grant {
  const operation* lock = nullptr;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

using lock_key = std::pair<std::string, std::string>; // (process, owner)

// What a holder learnt about its lock after the grant.
struct lock_facts {
  std::int64_t unlock_invoke = INT64_MAX;
  std::int64_t lost_ns = INT64_MAX; // KEEP: LOST push or broken connection
  std::int64_t sure_until = 0;      // EXTEND ok, PONG: the lock lasts at least until then
};

std::map<lock_key, lock_facts> facts_of(const std::vector<operation>& history) {
  std::map<lock_key, std::int64_t> keep_ttl;
  for (const auto& op : history)
    if (op.kind == "lock" && op.outcome == "ok" && op.keep)
      keep_ttl[{op.process, op.owner}] = op.ttl_ms;
  std::map<lock_key, lock_facts> out;
  for (const auto& op : history) {
    if (op.owner.empty())
      continue;
    const lock_key key{op.process, op.owner};
    if (op.kind == "unlock") {
      auto& f = out[key];
      f.unlock_invoke = std::min(f.unlock_invoke, op.invoke_ns);
    } else if (op.kind == "lost") {
      auto& f = out[key];
      f.lost_ns = std::min(f.lost_ns, op.complete_ns);
    } else if (op.kind == "extend" && op.outcome == "ok") {
      auto& f = out[key];
      f.sure_until = std::max(f.sure_until, op.invoke_ns + op.validity_ms * 1'000'000);
    } else if (op.kind == "ping" && op.outcome == "ok") {
      if (const auto it = keep_ttl.find(key); it != keep_ttl.end()) {
        auto& f = out[key];
        f.sure_until = std::max(f.sure_until, op.invoke_ns + it->second / 4 * 1'000'000);
      }
    }
  }
  return out;
}

// Grants with their windows (see check_validity_overlap).
std::vector<grant> grants_of(const std::vector<operation>& history) {
  const auto facts = facts_of(history);
  std::vector<grant> out;
  for (const auto& op : history) {
    if (op.kind != "lock" || op.outcome != "ok")
      continue;
    grant g{&op, op.complete_ns, op.invoke_ns + op.validity_ms * 1'000'000};
    if (auto it = facts.find({op.process, op.owner}); it != facts.end()) {
      g.end_ns = std::max(g.end_ns, it->second.sure_until);
      g.end_ns = std::min({g.end_ns, it->second.unlock_invoke, it->second.lost_ns});
    }
    out.push_back(g);
  }
  return out;
}

std::string describe(const operation& lock) {
  return std::string(lock.keep ? "KEEP " : "") + lock.process + "@daemon" +
         std::to_string(lock.daemon) + " fence " + std::to_string(lock.fence) + " ok " +
         ms_text(lock.complete_ns) + " validity " + std::to_string(lock.validity_ms) + "ms";
}

} // namespace

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

nlohmann::json to_json(const operation& op) {
  return {{"p", op.process},   {"f", op.kind},        {"r", op.resource},
          {"d", op.daemon},    {"inv", op.invoke_ns}, {"end", op.complete_ns},
          {"out", op.outcome}, {"reply", op.reply},   {"owner", op.owner},
          {"fence", op.fence}, {"v", op.validity_ms}, {"e", op.element},
          {"k", op.keep},      {"ttl", op.ttl_ms}};
}

operation operation_from_json(const nlohmann::json& doc) {
  operation op;
  op.process = doc.at("p").get<std::string>();
  op.kind = doc.at("f").get<std::string>();
  op.resource = doc.at("r").get<std::string>();
  op.daemon = doc.at("d").get<int>();
  op.invoke_ns = doc.at("inv").get<std::int64_t>();
  op.complete_ns = doc.at("end").get<std::int64_t>();
  op.outcome = doc.at("out").get<std::string>();
  op.reply = doc.at("reply").get<std::string>();
  op.owner = doc.at("owner").get<std::string>();
  op.fence = doc.at("fence").get<std::uint64_t>();
  op.validity_ms = doc.at("v").get<std::int64_t>();
  op.element = doc.at("e").get<std::string>();
  op.keep = doc.at("k").get<bool>();
  op.ttl_ms = doc.at("ttl").get<std::int64_t>();
  return op;
}

std::vector<operation> read_history(const std::filesystem::path& file) {
  std::vector<operation> out;
  std::ifstream in(file);
  if (!in)
    throw std::runtime_error("history " + file.string() + " cannot be read");
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    try {
      out.push_back(operation_from_json(nlohmann::json::parse(line)));
    } catch (const std::exception& e) {
      throw std::runtime_error("history " + file.string() + " line " + std::to_string(number) +
                               " does not parse (" + e.what() + "): " + line.substr(0, 200));
    }
  }
  return out;
}

void checker_result::add(std::string example) {
  ++violations;
  if (examples.size() < max_examples)
    examples.push_back(std::move(example));
}

checker_result check_validity_overlap(const std::vector<operation>& history) {
  checker_result result{"validity windows never overlap"};
  std::map<std::string, std::vector<grant>> by_resource;
  for (const auto& g : grants_of(history))
    by_resource[g.lock->resource].push_back(g);
  for (auto& [resource, grants] : by_resource) {
    std::sort(grants.begin(), grants.end(),
              [](const grant& a, const grant& b) { return a.start_ns < b.start_ns; });
    const grant* longest = nullptr; // the earlier window reaching furthest
    for (const auto& g : grants) {
      ++result.checked;
      if (g.end_ns <= g.start_ns)
        continue; // nothing was certain: the reply arrived after the lease could have ended
      if (longest != nullptr && g.start_ns < longest->end_ns)
        result.add(resource + ": " + describe(*g.lock) + " while " + describe(*longest->lock) +
                   " was valid until " + ms_text(longest->end_ns));
      if (longest == nullptr || g.end_ns > longest->end_ns)
        longest = &g;
    }
  }
  return result;
}

checker_result check_fence_order(const std::vector<operation>& history) {
  checker_result result{"fences increase in real-time order"};
  std::vector<const operation*> by_ok;
  for (const auto& op : history)
    if (op.kind == "lock" && op.outcome == "ok")
      by_ok.push_back(&op);
  std::map<std::uint64_t, const operation*> seen;
  for (const auto* op : by_ok)
    if (auto [it, fresh] = seen.emplace(op->fence, op); !fresh)
      result.add("fence " + std::to_string(op->fence) + " granted twice: " + describe(*op) +
                 " and " + describe(*it->second));
  std::vector<const operation*> by_invoke = by_ok;
  std::sort(by_ok.begin(), by_ok.end(),
            [](const operation* a, const operation* b) { return a->complete_ns < b->complete_ns; });
  std::sort(by_invoke.begin(), by_invoke.end(),
            [](const operation* a, const operation* b) { return a->invoke_ns < b->invoke_ns; });
  // Sweep: for each grant B in invoke order, the grants completed before B was invoked are a
  // prefix of by_ok; B's fence must exceed the largest fence in that prefix.
  std::size_t done = 0;
  const operation* highest = nullptr;
  for (const auto* b : by_invoke) {
    while (done < by_ok.size() && by_ok[done]->complete_ns < b->invoke_ns) {
      if (highest == nullptr || by_ok[done]->fence > highest->fence)
        highest = by_ok[done];
      ++done;
    }
    ++result.checked;
    if (highest != nullptr && b->fence <= highest->fence)
      result.add(describe(*b) + " invoked " + ms_text(b->invoke_ns) + " after " +
                 describe(*highest) + " completed");
  }
  return result;
}

checker_result check_lost_writes(const std::vector<operation>& history,
                                 const register_state& final_state) {
  checker_result result{"no acknowledged write lost"};
  for (const auto& op : history) {
    if (op.kind != "write" || op.outcome != "ok")
      continue;
    ++result.checked;
    const auto it = final_state.sets.find(op.resource);
    if (it == final_state.sets.end() || !it->second.contains(op.element))
      result.add(op.resource + ": element " + op.element + " written by " + op.process +
                 " with fence " + std::to_string(op.fence) + " at " + ms_text(op.complete_ns) +
                 " is missing");
  }
  return result;
}

std::map<std::pair<std::string, std::string>, std::int64_t>
window_ends(const std::vector<operation>& history) {
  std::map<std::pair<std::string, std::string>, std::int64_t> out;
  for (const auto& g : grants_of(history))
    out[{g.lock->process, g.lock->owner}] = g.end_ns;
  return out;
}

checker_result check_keep_survives_kill(const std::vector<operation>& history,
                                        const std::vector<std::pair<int, std::int64_t>>& kills) {
  checker_result result{"KEEP locks outlive their daemon's kill"};
  const auto facts = facts_of(history);
  for (const auto& [daemon, kill_ns] : kills) {
    for (const auto& held : history) {
      if (held.kind != "lock" || held.outcome != "ok" || !held.keep || held.daemon != daemon ||
          held.complete_ns >= kill_ns)
        continue;
      if (const auto it = facts.find({held.process, held.owner});
          it != facts.end() && std::min(it->second.unlock_invoke, it->second.lost_ns) < kill_ns)
        continue; // released or lost before the kill
      ++result.checked;
      const std::int64_t until = kill_ns + held.ttl_ms / 2 * 1'000'000;
      for (const auto& other : history)
        if (other.kind == "lock" && other.outcome == "ok" && other.resource == held.resource &&
            &other != &held && other.complete_ns >= kill_ns && other.complete_ns < until)
          result.add(held.resource + ": " + describe(other) +
                     " within ttl/2 of the kill of daemon" + std::to_string(daemon) + " at " +
                     ms_text(kill_ns) + ", which held " + describe(held));
    }
  }
  return result;
}

stale_write_counts count_stale_writes(const std::vector<operation>& history) {
  std::map<std::pair<std::string, std::uint64_t>, std::int64_t> window_end; // (process, fence)
  for (const auto& g : grants_of(history))
    window_end[{g.lock->process, g.lock->fence}] = g.end_ns;
  stale_write_counts counts;
  for (const auto& op : history) {
    if (op.kind != "write")
      continue;
    const auto it = window_end.find({op.process, op.fence});
    if (it == window_end.end() || op.invoke_ns <= it->second)
      continue;
    ++counts.stale;
    if (op.outcome == "ok")
      ++counts.accepted;
    else if (op.outcome == "fail")
      ++counts.rejected;
  }
  return counts;
}

} // namespace redlockd::chaos
