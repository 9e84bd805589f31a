// Looking at the daemon process from outside, through /proc.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "daemon_process.hpp"

namespace redlockd::test {

// The pid of the redlockd whose command line names this daemon's config file; -1 if none.
inline int daemon_pid(const daemon_process& daemon) {
  const std::string config = daemon.config_path().string();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    const std::string args((std::istreambuf_iterator<char>(cmdline)),
                           std::istreambuf_iterator<char>());
    if (args.find("redlockd") != std::string::npos && args.find(config) != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

// Resident memory of a process in KiB; -1 if unknown.
inline long rss_kib(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

} // namespace redlockd::test
