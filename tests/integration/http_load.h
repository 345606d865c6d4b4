#pragma once

// What the http_load cases share (http_load_test.cpp, http_load_framing_test.cpp): the bridges they
// load, made once for all (http_load_test.cpp keeps them), and a request on a connection of its own.

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "harness.h"

namespace outbox::test {

using namespace std::chrono_literals;

inline const char* kToken = "http-load-t0ken-1";

// A bridge whose source's snapshot reads `rows` rows of a table `accounts` (made with MariaDB's
// sequence engine: a million rows in seconds), with the admin API on and, when `metricsApart`,
// the health routes on a listener of their own.
struct LoadBridge {
  TestDatabase database;
  SourceSpec source;
  int metricsPort = 0;
  std::string config;
  std::unique_ptr<BridgeProcess> process;
  int port = 0;

  LoadBridge(const std::string& purpose, uint64_t rows, bool metricsApart)
      : database(purpose),
        source{uniqueName("hl", database), &database,
               {{"snapshot_query", "\"SELECT id, name FROM accounts\""}}},
        metricsPort(metricsApart ? freeLoopbackPort() : 0) {
    std::string http = fmt::format("[http]\nlisten = \"127.0.0.1:0\"\nadmin_token = \"{}\"\n", kToken);
    if (metricsApart) http += fmt::format("metrics_listen = \"127.0.0.1:{}\"\n", metricsPort);
    config = writeConfig({source}, http);
    migrate(config);
    for (const std::string& sql :
         {std::string("CREATE TABLE accounts (id BIGINT UNSIGNED PRIMARY KEY, name VARCHAR(40) NOT NULL)"),
          fmt::format("INSERT INTO accounts SELECT seq, CONCAT('account ', seq) FROM seq_1_to_{}", rows)}) {
      Status s = database.sql().exec(sql);
      if (!s.isOk()) throw std::runtime_error(s.message());
    }
    process = std::make_unique<BridgeProcess>(config);
    process->start();
    port = process->httpPort();
    if (!metricsApart) metricsPort = port;
    BOOST_REQUIRE(waitUntil([&] { return httpRequest(metricsPort, "GET", "/healthz").status == 200; }, 10s));
  }
  ~LoadBridge() { process->stop(); }
  std::string snapshotPath() const { return "/v1/sources/" + source.name + "/control-snapshot"; }
};

// The bridge with a 1,000,000-row snapshot and its health routes on a listener apart, and the one
// with everything on its main listener: made when a test first asks, shared by the rest.
LoadBridge& withBigSnapshot();
LoadBridge& allOnOneListener();

// `request` sent on one fresh connection; every byte the server sends until it closes or is quiet
// for `quiet`.
inline std::string roundTrip(int port, const std::string& request, std::chrono::milliseconds quiet = 1500ms) {
  int fd = connectTo(port);
  BOOST_REQUIRE(fd >= 0);
  sendAll(fd, request);
  std::string out = readAll(fd, quiet);
  ::close(fd);
  return out;
}

}  // namespace outbox::test
