#include "supervisor/evidence.h"

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "supervisor/process_tree.h"
#include "supervisor/worker_server_client.h"

namespace distjob {
namespace {

constexpr size_t kMaxDescendants = 16;

bool IsSocket(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::vector<ProcessStates> ReadTree(const EvidenceOptions& options, pid_t pid) {
  std::vector<ProcessStates> tree = {ReadThreadStates(options.proc_root, pid)};
  // Descendants come from the real /proc only: a fake tree's pids are not
  // this machine's processes.
  if (options.proc_root != "/proc") return tree;
  std::vector<pid_t> below = ListDescendants(pid);
  if (below.size() > kMaxDescendants) below.resize(kMaxDescendants);
  for (pid_t child : below) {
    tree.push_back(ReadThreadStates(options.proc_root, child));
  }
  return tree;
}

void AskServer(const EvidenceTarget& target, const EvidenceOptions& options,
               absl::Time deadline, WorkerEvidence* out) {
  if (!IsSocket(target.server_socket)) return;
  for (const std::string& handler : options.handlers) {
    auto answer = AskWorkerServer(target.server_socket, handler, deadline,
                                  options.max_answer_bytes);
    std::string text;
    if (!answer.ok()) {
      text = absl::StrCat("error: ", answer.status().message());
    } else if (answer->status != 200) {
      text = absl::StrCat("error: HTTP ", answer->status, ": ", answer->body);
    } else {
      text = answer->body;
      if (answer->truncated) absl::StrAppend(&text, "\n[cut]");
    }
    out->answers.emplace_back(handler, std::move(text));
  }
}

// The thread most likely to say where a process is stuck: one in D, else
// the main thread (tid == pid).
const ThreadState* Telling(const ProcessStates& process) {
  for (const ThreadState& t : process.threads) {
    if (t.state == 'D') return &t;
  }
  for (const ThreadState& t : process.threads) {
    if (t.tid == process.pid) return &t;
  }
  return process.threads.empty() ? nullptr : &process.threads.front();
}

Json ProcessJson(const ProcessStates& process) {
  Json threads = Json::array();
  for (const ThreadState& t : process.threads) {
    threads.push_back(Json{{"tid", t.tid},
                           {"comm", ValidUtf8(t.comm)},
                           {"state", std::string(1, t.state)},
                           {"wchan", ValidUtf8(t.wchan)}});
  }
  Json out{{"pid", process.pid},
           {"unkillable", Unkillable(process)},
           {"threads", std::move(threads)}};
  if (process.threads_not_read > 0) {
    out["threads_not_read"] = process.threads_not_read;
  }
  return out;
}

}  // namespace

Evidence CollectEvidence(const std::vector<EvidenceTarget>& targets,
                         const std::string& reason,
                         const EvidenceOptions& options, absl::Time deadline,
                         bool ask_servers) {
  Evidence evidence;
  evidence.reason = reason;
  evidence.time = absl::Now();
  deadline = std::min(deadline, evidence.time + options.budget);
  for (size_t k = 0; k < targets.size(); ++k) {
    WorkerEvidence worker;
    worker.local_rank = targets[k].local_rank;
    worker.pid = targets[k].pid;
    worker.processes = ReadTree(options, targets[k].pid);
    if (ask_servers) {
      // Each worker gets its share of what is left, so one server that
      // never answers cannot take the others' time.
      const absl::Time now = absl::Now();
      const absl::Time mine =
          now + (deadline - now) / static_cast<int64_t>(targets.size() - k);
      AskServer(targets[k], options, std::min(mine, deadline), &worker);
    }
    evidence.workers.push_back(std::move(worker));
  }
  evidence.took = absl::Now() - evidence.time;
  return evidence;
}

std::vector<std::string> SummarizeEvidence(const Evidence& evidence) {
  std::vector<std::string> lines;
  for (const WorkerEvidence& w : evidence.workers) {
    if (w.processes.empty() || w.processes.front().threads.empty()) {
      lines.push_back(absl::StrCat("local_rank ", w.local_rank, " (pid ", w.pid,
                                   "): already gone"));
      continue;
    }
    const ProcessStates& main = w.processes.front();
    std::string line =
        absl::StrCat("local_rank ", w.local_rank, " (pid ", w.pid,
                     "): ", main.threads.size(), " thread(s)");
    if (const ThreadState* t = Telling(main)) {
      absl::StrAppend(&line, ", ",
                      t->tid == w.pid ? std::string("main thread")
                                      : absl::StrCat("thread ", t->tid),
                      " ", DescribeState(t->state));
      if (!t->wchan.empty()) absl::StrAppend(&line, " in ", t->wchan);
    }
    for (const ProcessStates& p : w.processes) {
      if (Unkillable(p)) {
        absl::StrAppend(&line, "; pid ", p.pid,
                        " is UNKILLABLE (uninterruptible sleep)");
      }
    }
    if (!w.answers.empty()) {
      std::vector<std::string> asked;
      for (const auto& [handler, text] : w.answers) {
        asked.push_back(absl::StrCat(
            handler, text.rfind("error: ", 0) == 0 ? " (no answer)" : ""));
      }
      absl::StrAppend(&line, "; its server answered ",
                      absl::StrJoin(asked, ", "));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

Json EvidenceToJson(const Evidence& evidence) {
  Json workers = Json::array();
  for (const WorkerEvidence& w : evidence.workers) {
    Json processes = Json::array();
    for (const ProcessStates& p : w.processes) {
      processes.push_back(ProcessJson(p));
    }
    Json answers = Json::object();
    for (const auto& [handler, text] : w.answers) {
      answers[handler] = ValidUtf8(text);
    }
    workers.push_back(Json{{"local_rank", w.local_rank},
                           {"pid", w.pid},
                           {"processes", std::move(processes)},
                           {"worker_server", std::move(answers)}});
  }
  return Json{{"reason", evidence.reason},
              {"time", absl::FormatTime(absl::RFC3339_full, evidence.time,
                                        absl::UTCTimeZone())},
              {"took_ms", absl::ToInt64Milliseconds(evidence.took)},
              {"workers", std::move(workers)}};
}

std::vector<int> UnkillableRanks(const Evidence& evidence) {
  std::vector<int> ranks;
  for (const WorkerEvidence& w : evidence.workers) {
    if (std::any_of(w.processes.begin(), w.processes.end(), Unkillable)) {
      ranks.push_back(w.local_rank);
    }
  }
  return ranks;
}

}  // namespace distjob
