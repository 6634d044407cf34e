#include "fuzz/fuzz_input.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace distjob {

std::vector<std::string> SplitFields(const uint8_t* data, size_t size,
                                     size_t max_fields) {
  std::vector<std::string> fields;
  if (max_fields == 0) return fields;
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  while (fields.size() + 1 < max_fields) {
    const char* nul = static_cast<const char*>(memchr(p, '\0', end - p));
    if (nul == nullptr) break;
    fields.emplace_back(p, nul);
    p = nul + 1;
  }
  fields.emplace_back(p, end);
  return fields;
}

EnvMap FieldsToEnv(const std::vector<std::string>& fields, size_t from) {
  EnvMap env;
  for (size_t i = from; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    const size_t eq = f.find('=');
    if (eq == std::string::npos) {
      env[f] = "";
    } else {
      env[f.substr(0, eq)] = f.substr(eq + 1);
    }
  }
  return env;
}

namespace {

std::vector<std::string>* scratch_dirs = nullptr;

void RemoveScratchDirs() {
  for (const std::string& dir : *scratch_dirs) {
    ClearScratchDir(dir);
    rmdir(dir.c_str());
  }
}

}  // namespace

std::string ScratchDir(const char* name) {
  // tmpfs where there is one: ext4 flushes a truncated file's data on
  // close (auto_da_alloc), which cost a disk write per input.
  const char* base = getenv("TMPDIR");
  if (base == nullptr || *base == '\0') {
    base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  }
  std::string path = std::string(base) + "/distjob-fuzz-" + name + "-XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    perror("mkdtemp");
    abort();
  }
  if (scratch_dirs == nullptr) {
    scratch_dirs = new std::vector<std::string>;
    atexit(RemoveScratchDirs);
  }
  scratch_dirs->push_back(path);
  return path;
}

void WriteScratchFile(const std::string& path, const std::string& content) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    perror(path.c_str());
    abort();
  }
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n <= 0) {
      perror(path.c_str());
      abort();
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
}

void ClearScratchDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    unlink((dir + "/" + name).c_str());
  }
  closedir(d);
}

}  // namespace distjob
