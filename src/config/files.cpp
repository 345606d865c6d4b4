// Reading the files a config names: only regular files, and only so much of them. A directory, a
// FIFO (whose open or read would wait for a writer for ever) or a device such as /dev/zero (which
// never ends) is refused before a byte is read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "config/config.h"

namespace outbox {

namespace {

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// An open descriptor of the regular file `path` (O_NONBLOCK: opening a FIFO does not wait), or a
// ConfigError naming `key`.
int openRegular(const std::string& key, const std::string& path, const std::string& what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    throw ConfigError(key, fmt::format("{}cannot read '{}': {}", what, shownValue(path), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const char* kind = ::fstat(fd, &st) == 0 ? kindOf(st.st_mode) : "not a regular file";
    ::close(fd);
    throw ConfigError(key, fmt::format("{}'{}' is {}, not a file", what, shownValue(path), kind));
  }
  return fd;
}

}  // namespace

std::string readSmallFile(const std::string& key, const std::string& path, size_t maxBytes) {
  if (path.empty()) throw ConfigError(key, "the file name is empty");
  int fd = openRegular(key, path, "");
  std::string content;
  char buffer[16384];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw ConfigError(key, fmt::format("cannot read '{}': {}", shownValue(path), std::strerror(error)));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
    if (content.size() > maxBytes) {
      ::close(fd);
      throw ConfigError(key, fmt::format("'{}' is larger than {} bytes", shownValue(path), maxBytes));
    }
  }
  ::close(fd);
  return content;
}

void requireRegularFile(const std::string& key, const std::string& path, const std::string& what) {
  if (path.empty()) return;
  ::close(openRegular(key, path, what));
}

}  // namespace outbox
