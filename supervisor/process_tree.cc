#include "supervisor/process_tree.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace distjob {
namespace {

// Parses "pid (comm) state ppid ..." where comm may hold spaces and parens.
bool ReadStat(pid_t pid, pid_t* ppid, char* state) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return false;
  int parent = 0;
  if (std::sscanf(close_paren + 1, " %c %d", state, &parent) != 2) return false;
  *ppid = parent;
  return true;
}

}  // namespace

std::vector<pid_t> ListDescendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // ppid -> pid
  std::map<pid_t, char> states;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* entry = readdir(dir)) {
      char* end = nullptr;
      const long pid = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0') continue;
      pid_t ppid = 0;
      char state = '?';
      if (ReadStat(static_cast<pid_t>(pid), &ppid, &state)) {
        children.emplace(ppid, static_cast<pid_t>(pid));
        states[static_cast<pid_t>(pid)] = state;
      }
    }
    closedir(dir);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    auto range = children.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it) {
      frontier.push_back(it->second);
      if (states[it->second] != 'Z') out.push_back(it->second);
    }
  }
  return out;
}

}  // namespace distjob
