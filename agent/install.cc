#include "agent/install.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/subcommand_flags.h"
#include "agent/exit_codes.h"
#include "common/errno_status.h"
#include "common/files.h"

namespace distjob {
namespace {

absl::Status CopyFile(const std::string& source, const std::string& target) {
  const int in = open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return ErrnoError(errno, absl::StrCat("open ", source));
  absl::Cleanup close_in = [in] { close(in); };
  // Non-blocking: a FIFO where the binary goes must not hang the init
  // container (often PID 1, where a stop signal without a handler is lost).
  absl::StatusOr<int> opened = OpenOutputFile("install", target, O_TRUNC);
  if (!opened.ok()) return opened.status();
  const int out = *opened;
  absl::Cleanup close_out = [out] { close(out); };
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(in, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("read ", source));
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(out, buffer + done, n - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, absl::StrCat("write ", target));
      }
      done += w;
    }
  }
  // The umask may have narrowed the mode given to open().
  if (fchmod(out, 0755) != 0) {
    return ErrnoError(errno, absl::StrCat("chmod ", target));
  }
  if (fsync(out) != 0) return ErrnoError(errno, absl::StrCat("fsync ", target));
  return absl::OkStatus();
}

}  // namespace

absl::Status InstallAgent(const std::string& source, const std::string& dir) {
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "install: expected a target directory, e.g. `install /opt/distjob`");
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("mkdir ", dir));
  }
  const std::string target = absl::StrCat(dir, "/distjob-agent");
  const std::string temporary = absl::StrCat(target, ".tmp");
  absl::Status copied = CopyFile(source, temporary);
  if (!copied.ok()) {
    unlink(temporary.c_str());
    return copied;
  }
  if (rename(temporary.c_str(), target.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return ErrnoError(error, absl::StrCat("rename to ", target));
  }
  const std::string link = absl::StrCat(dir, "/torchrun");
  if (unlink(link.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("unlink ", link));
  }
  // Relative, so the link stays valid wherever the volume is mounted.
  if (symlink("distjob-agent", link.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("symlink ", link));
  }
  return absl::OkStatus();
}

absl::Status ReplaceTorchrun(const std::string& source,
                             const std::string& torchrun) {
  const size_t slash = torchrun.rfind('/');
  const std::string name =
      slash == std::string::npos ? torchrun : torchrun.substr(slash + 1);
  if (name != "torchrun") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replace ", torchrun,
        ": expected a path ending in /torchrun (the agent acts as torchrun "
        "only under that name)"));
  }
  const std::string dir =
      slash == std::string::npos ? "." : torchrun.substr(0, slash);
  struct stat st;
  if (lstat(torchrun.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    // Keep PyTorch's launcher, so the change can be undone.
    const std::string backup = torchrun + ".pytorch";
    if (rename(torchrun.c_str(), backup.c_str()) != 0) {
      return ErrnoError(errno,
                        absl::StrCat("rename ", torchrun, " to ", backup));
    }
  }
  return InstallAgent(source, dir);
}

int InstallCommand(const std::vector<std::string>& args, const EnvMap& env) {
  std::string dir;
  std::string replace;
  FlagSet flags(
      "Usage: distjob-agent install [--dir] DIR\n"
      "       distjob-agent install --replace PATH/torchrun\n\n"
      "Copies this binary to DIR/distjob-agent and links DIR/torchrun to it:\n"
      "the init container of the shared-emptyDir pattern (the agent-only\n"
      "image has no cp).");
  Flag dir_flag;
  dir_flag.names = {"dir"};
  dir_flag.metavar = "DIR";
  dir_flag.help = "The target directory; the same as the argument.";
  dir_flag.set = SetString(&dir);
  flags.Add(std::move(dir_flag));
  Flag replace_flag;
  replace_flag.names = {"replace"};
  replace_flag.metavar = "PATH";
  replace_flag.help =
      "Replace the torchrun at PATH (e.g. /opt/conda/bin/torchrun) in place "
      "with the agent, keeping it as PATH.pytorch.";
  replace_flag.set = SetString(&replace);
  flags.Add(std::move(replace_flag));
  std::vector<std::string> positional;
  if (auto done =
          ParseSubcommandFlags("install", flags, args, env, 1, &positional)) {
    return *done;
  }
  if (!replace.empty()) {
    if (!dir.empty() || !positional.empty()) {
      std::fputs(
          "distjob-agent install: --replace PATH takes no target "
          "directory\n",
          stderr);
      return kExitUsage;
    }
    const absl::Status replaced = ReplaceTorchrun("/proc/self/exe", replace);
    if (!replaced.ok()) {
      std::fprintf(stderr, "distjob-agent install: %s\n",
                   std::string(replaced.message()).c_str());
      return absl::IsInvalidArgument(replaced) ? kExitUsage : 1;
    }
    return 0;
  }
  if (!positional.empty()) {
    if (!dir.empty()) {
      std::fprintf(stderr,
                   "distjob-agent install: give the target directory once, "
                   "as --dir or as the argument, not both\n");
      return kExitUsage;
    }
    dir = positional[0];
  }
  if (dir.empty()) {
    std::fputs(
        "distjob-agent install: expected exactly one argument, the "
        "target directory (e.g. `install /opt/distjob`)\n",
        stderr);
    return kExitUsage;
  }
  const absl::Status status = InstallAgent("/proc/self/exe", dir);
  if (!status.ok()) {
    std::fprintf(stderr, "distjob-agent install: %s\n",
                 std::string(status.message()).c_str());
    return ExitCodeFor(status);
  }
  return 0;
}

}  // namespace distjob
