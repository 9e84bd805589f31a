#include "redlockd/metrics/counter_rates.hpp"

namespace redlockd {

counter_rates::counter_rates(clock_type::time_point started, std::chrono::seconds step)
    : step_(step) {
  kept_.push_back({started, {}});
}

counter_rates::rates counter_rates::observe(clock_type::time_point now, const counters& current) {
  const reading& base = kept_.front();
  rates out;
  out.window_s = std::chrono::duration<double>(now - base.at).count();
  for (const auto& [name, value] : current) {
    const auto before = base.values.find(name);
    const std::uint64_t from = before == base.values.end() ? 0 : before->second;
    const double delta = value > from ? static_cast<double>(value - from) : 0.0;
    out.per_s[name] = out.window_s > 0 ? delta / out.window_s : 0.0;
  }
  if (now - kept_.back().at >= step_) {
    kept_.push_back({now, current});
    if (kept_.size() > 2)
      kept_.pop_front();
  }
  return out;
}

} // namespace redlockd
