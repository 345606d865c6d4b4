#pragma once

// What the cluster and failover tests share: producers that write the whole time a fault runs,
// and the check of a stream against its outbox table afterwards (README, "The
// guarantees, in plain words", 1-5).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace outbox::test {

// `threads` producers, each on a connection of its own, committing a transaction of 1-4 outbox
// rows every `pause` into the tables in turn, until stopped. Rows carry entity keys "p<P>-<k>"
// (five per producer thread P, numbered across the process) and payloads {"n": N, "p": P} with N
// rising per thread on every attempt,
// so along each entity the commit order is the order of n. A failed statement (the server went
// away) drops the connection and retries after 100 ms: the database, not a count kept here, says
// which rows committed.
class Producers {
 public:
  using Connect = std::function<std::unique_ptr<db::Connection>()>;
  Producers(Connect connect, std::vector<std::string> tables, int threads = 2,
            std::chrono::milliseconds pause = std::chrono::milliseconds(3));
  ~Producers();
  Producers(const Producers&) = delete;
  Producers& operator=(const Producers&) = delete;
  void stop();
  // Transactions that committed (their COMMIT returned ok).
  uint64_t commits() const { return commits_; }

 private:
  void produce(int thread);

  Connect connect_;
  std::vector<std::string> tables_;
  std::chrono::milliseconds pause_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> commits_{0};
  std::vector<std::thread> threads_;
};

// The source's published_through, or 0 while its database does not answer (a restart, a failover).
uint64_t publishedThrough(TestDatabase& database, const std::string& source);
// Whether `more` versions beyond those published when asked are published within `timeout`.
bool publishingAdvances(TestDatabase& database, const std::string& source, uint64_t more,
                        std::chrono::milliseconds timeout);

// Waits (up to `timeout`) until the source has published every row of its outbox table, then
// reads its stream through `reader` and checks: versions dense from `firstVersion` and each once,
// in stream order (1, 2, 5), as many messages of the current epoch as the table has rows from that
// version on (4: nothing lost), and along each entity the producers' order (3). Throws the first
// violation, with `context` (bridge logs). Returns the messages read.
std::vector<nats::StoredMessage> requireStreamMatchesTable(TestDatabase& database, const SourceSpec& source,
                                                           StreamReader& reader, std::chrono::seconds timeout,
                                                           const std::function<std::string()>& context);

// Along each entity key (header Outbox-Entity-Key) the payloads' "n" rise: "" or the first
// entity whose order broke.
std::string checkEntityOrder(const std::vector<nats::StoredMessage>& messages);

}  // namespace outbox::test
