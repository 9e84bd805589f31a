#include "history.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

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

// Grants with their windows, cut at the holder's own UNLOCK invoke.
std::vector<grant> grants_of(const std::vector<operation>& history) {
  std::map<std::pair<std::string, std::string>, std::int64_t> unlock_invoke; // (process, owner)
  for (const auto& op : history)
    if (op.kind == "unlock" && !op.owner.empty()) {
      auto [it, fresh] = unlock_invoke.try_emplace({op.process, op.owner}, op.invoke_ns);
      if (!fresh)
        it->second = std::min(it->second, op.invoke_ns);
    }
  std::vector<grant> out;
  for (const auto& op : history) {
    if (op.kind != "lock" || op.outcome != "ok")
      continue;
    grant g{&op, op.complete_ns, op.invoke_ns + op.validity_ms * 1'000'000};
    if (auto it = unlock_invoke.find({op.process, op.owner}); it != unlock_invoke.end())
      g.end_ns = std::min(g.end_ns, it->second);
    out.push_back(g);
  }
  return out;
}

std::string describe(const operation& lock) {
  return lock.process + "@daemon" + std::to_string(lock.daemon) + " fence " +
         std::to_string(lock.fence) + " ok " + ms_text(lock.complete_ns) + " validity " +
         std::to_string(lock.validity_ms) + "ms";
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
          {"fence", op.fence}, {"v", op.validity_ms}, {"e", op.element}};
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
  return op;
}

std::vector<operation> read_history(const std::filesystem::path& file) {
  std::vector<operation> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    try {
      out.push_back(operation_from_json(nlohmann::json::parse(line)));
    } catch (const std::exception&) {
      // a line torn by a kill: the operation never completed as far as anyone knows
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
