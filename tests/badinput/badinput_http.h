#pragma once

// What the HTTP bad-input cases share (badinput_http_test.cpp, badinput_http_admin_test.cpp): a
// bridge with the admin API on, and the statuses a server answers to requests sent as they are.

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "harness.h"

namespace outbox::test {

using namespace std::chrono_literals;

inline const char* kToken = "badinput-http-t0ken";

// A bridge with the admin API on, one source (its database migrated), and its log.
struct Bridge {
  TestDatabase database{"badhttp"};
  SourceSpec source{uniqueName("bh", database), &database, {}};
  std::string config = writeConfig(
      {source}, fmt::format("[http]\nlisten = \"127.0.0.1:0\"\nadmin_token = \"{}\"\n", kToken));
  BridgeProcess process{config};
  int port = 0;

  Bridge() {
    migrate(config);
    process.start();
    port = process.httpPort();
    BOOST_REQUIRE(
        waitUntil([&] { return httpRequest(port, "GET", "/healthz").status == 200; }, 10s));
  }
  ~Bridge() { process.stop(); }
  std::string auth() const { return fmt::format("Authorization: Bearer {}\r\n", kToken); }
  std::string admin(const std::string& action) const {
    return "/v1/admin/sources/" + source.name + "/" + action;
  }
  long rssKb() const {
    std::ifstream in(fmt::format("/proc/{}/status", process.pid()));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
  }
};

// Sends `parts` on one connection, 300 ms apart (a server that answers before the body came
// must still not read the body as a request), and returns the statuses of every answer.
inline std::vector<int> answersTo(int port, const std::vector<std::string>& parts,
                                  std::chrono::milliseconds quiet = 1500ms) {
  int fd = connectTo(port);
  BOOST_REQUIRE(fd >= 0);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) std::this_thread::sleep_for(300ms);
    sendAll(fd, parts[i]);
  }
  auto out = statuses(readAll(fd, quiet));
  ::close(fd);
  return out;
}

inline std::vector<int> answersTo(int port, const std::string& request,
                                  std::chrono::milliseconds quiet = 1500ms) {
  return answersTo(port, std::vector<std::string>{request}, quiet);
}

}  // namespace outbox::test
