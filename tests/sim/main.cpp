// redlockd-sim: the deterministic simulator (tests/sim/README.md).
//   redlockd-sim --seed S                 one run, replayed bit for bit
//   redlockd-sim --seeds N [--from S]     N runs, seeds S, S+1, ... (S defaults to 1)
//   redlockd-sim --minutes T [--from S]   runs seeds from S until T minutes have passed
//   --weaken NAME       switch one rule off in the engine (simulation.cpp: weakenings())
//   --expect CHECKER    exit 0 only if a violation of that checker (or of one of a comma-separated
//                       list) was found; other violations are counted and passed over (for the
//                       weakened runs in CI, and to look for one kind of finding)
//   --skip S[,S]        leaves those seeds out (seeds of open engine findings, README.md)
//   --keep-going        go on after a violating seed (a survey: one line per violating seed)
//   --replay-check      run every seed twice and fail if the two runs differ in anything
//   --scenario NAME     a scripted run (tests/sim/scenarios.cpp) instead of a seed's
//   --mix KIND          the clients take mostly KIND (exclusive, shared, permit, set) or a mix
//                       (mixed), whatever the seed chose (simulation.cpp: choose_kinds)
//   --faults PROFILE    the seed's faults drawn as PROFILE says (none, mixed, key-loss,
//                       restarts: simulation.cpp, choose), whatever profile the seed drew
//   --verbose           the engines' logs and the scripts the masters run, in virtual time
// On a violation: the seed, the checker and the resource's recent history; exit 1. The last line
// is always "sim: <operations> operations, <seeds> seeds, <violations> violations".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "scenarios.hpp"
#include "simulation.hpp"

using namespace redlockd::sim;

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "redlockd-sim: %s\nusage: redlockd-sim (--seed S | --seeds N [--from S] | --minutes T "
      "[--from S]) [--weaken NAME] [--mix KIND] [--faults PROFILE] [--skip S,...] [--expect "
      "CHECKER] [--keep-going] "
      "[--replay-check] "
      "[--verbose] [--quiet]\n",
      why);
  std::exit(64);
}

std::uint64_t number(const char* text, const char* option) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0')
    usage((std::string("not a number after ") + option).c_str());
  return value;
}

} // namespace

int main(int argc, char** argv) {
  std::uint64_t from = 1;
  std::uint64_t seeds = 1;
  double minutes = 0;
  bool one = false;
  std::vector<std::string> expected;
  std::vector<std::uint64_t> skipped;
  bool quiet = false;
  bool keep_going = false;
  bool replay_check = false;
  run_options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--seed") {
      from = number(value(), "--seed");
      seeds = 1;
      one = true;
    } else if (arg == "--seeds") {
      seeds = number(value(), "--seeds");
    } else if (arg == "--from") {
      from = number(value(), "--from");
    } else if (arg == "--minutes") {
      minutes = std::strtod(value(), nullptr);
      if (minutes <= 0)
        usage("--minutes needs a positive number");
    } else if (arg == "--weaken") {
      options.weaken = value();
      bool known = false;
      for (const std::string& name : weakenings())
        known = known || name == options.weaken;
      if (!known)
        usage(("unknown --weaken " + options.weaken).c_str());
    } else if (arg == "--expect") {
      std::string list = value();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        expected.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (arg == "--mix") {
      options.mix = value();
      if (std::find(mixes().begin(), mixes().end(), options.mix) == mixes().end())
        usage(("unknown --mix " + options.mix).c_str());
    } else if (arg == "--faults") {
      options.faults = value();
      if (std::find(fault_profiles().begin(), fault_profiles().end(), options.faults) ==
          fault_profiles().end())
        usage(("unknown --faults " + options.faults).c_str());
    } else if (arg == "--skip") {
      const std::string list = value();
      for (std::size_t at = 0; at < list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        skipped.push_back(number(list.substr(at, comma - at).c_str(), "--skip"));
        at = comma + 1;
      }
    } else if (arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "--scenario") {
      options.scenario = value();
      if (find_scenario(options.scenario) == nullptr)
        usage(("unknown --scenario " + options.scenario).c_str());
      one = true;
    } else if (arg == "--replay-check") {
      replay_check = true;
    } else if (arg == "--keep-going") {
      keep_going = true;
    } else if (arg == "--quiet") {
      quiet = true;
    } else {
      usage(("unknown argument " + arg).c_str());
    }
  }
  if (one && minutes > 0)
    usage("--seed and --minutes exclude each other");

  // The wall clock only decides when --minutes is up; no run reads it.
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::chrono::duration<double>(minutes * 60);
  std::uint64_t operations = 0;
  std::uint64_t ran = 0;
  std::uint64_t violations = 0;
  bool found_expected = false;
  for (std::uint64_t seed = from;; ++seed) {
    if (minutes > 0 ? std::chrono::steady_clock::now() >= deadline : seed - from >= seeds)
      break;
    if (std::find(skipped.begin(), skipped.end(), seed) != skipped.end())
      continue;
    options.seed = seed;
    run_result result = run_seed(options);
    operations += result.operations;
    ++ran;
    if (replay_check) {
      const run_result again = run_seed(options);
      if (again.digest != result.digest)
        result.violations.insert(result.violations.begin(),
                                 violation{"replay", none, 0,
                                           "a second run of the seed differed (" +
                                               std::to_string(result.events) + " events, then " +
                                               std::to_string(again.events) + ")"});
    }
    if (one && !quiet)
      std::printf("%s: %s; %llu operations, %llu events, digest %016llx\n",
                  options.scenario.empty() ? ("seed " + std::to_string(seed)).c_str()
                                           : options.scenario.c_str(),
                  result.setup.c_str(), static_cast<unsigned long long>(result.operations),
                  static_cast<unsigned long long>(result.events),
                  static_cast<unsigned long long>(result.digest));
    const violation* wanted = nullptr;
    for (const violation& v : result.violations)
      if (!wanted && std::find(expected.begin(), expected.end(), v.checker) != expected.end())
        wanted = &v;
    if (!expected.empty() && !wanted) {
      violations += result.violations.size();
      continue;
    }
    if (!result.violations.empty() && keep_going) {
      violations += result.violations.size();
      std::map<std::string, const violation*> first_of;
      for (const violation& v : result.violations)
        first_of.emplace(v.checker, &v);
      for (const auto& [checker, v] : first_of)
        std::printf("seed %llu: %s: %s\n", static_cast<unsigned long long>(seed), checker.c_str(),
                    v->what.c_str());
      std::fflush(stdout);
    } else if (!result.violations.empty()) {
      violations += result.violations.size();
      const violation& first = wanted ? *wanted : result.violations.front();
      const std::string replay = (options.scenario.empty() ? "--seed " + std::to_string(seed)
                                                           : "--scenario " + options.scenario) +
                                 (options.weaken.empty() ? "" : " --weaken " + options.weaken) +
                                 (options.mix.empty() ? "" : " --mix " + options.mix) +
                                 (options.faults.empty() ? "" : " --faults " + options.faults);
      std::printf("VIOLATION %s: %s: %s\n  setup: %s\n  replay: redlockd-sim %s\n",
                  options.scenario.empty() ? ("seed " + std::to_string(seed)).c_str()
                                           : ("scenario " + options.scenario).c_str(),
                  first.checker.c_str(), first.what.c_str(), result.setup.c_str(), replay.c_str());
      for (std::size_t i = 0, shown = 0; i < result.violations.size() && shown < 4; ++i)
        if (&result.violations[i] != &first && ++shown)
          std::printf("  also %s: %s\n", result.violations[i].checker.c_str(),
                      result.violations[i].what.c_str());
      if (first.resource != none)
        std::printf("  history of %s around %.3f ms:\n%s",
                    result.records.resources[first.resource].c_str(),
                    static_cast<double>(first.at) / 1000,
                    excerpt(result.records, first.resource, first.at).c_str());
      std::fflush(stdout);
      if (!expected.empty()) {
        found_expected = true;
        break;
      }
      if (!one)
        break; // the first failing seed is the one to replay
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!quiet)
    std::fprintf(stderr, "sim: %.1f s, %.0f operations/s\n", seconds,
                 seconds > 0 ? static_cast<double>(operations) / seconds : 0.0);
  std::printf("sim: %llu operations, %llu seeds, %llu violations\n",
              static_cast<unsigned long long>(operations), static_cast<unsigned long long>(ran),
              static_cast<unsigned long long>(violations));
  if (!expected.empty())
    return found_expected ? 0 : 1;
  return violations > 0 ? 1 : 0;
}
