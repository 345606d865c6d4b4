#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "db/session.h"
#include "relay/ports.h"

namespace outbox {

// The published marks of the sources of one database that this process leads, written together
// (docs/design.md, "Marks"): a relay offers its acks as they come; the first whose acks have
// waited their mark interval writes every mark offered on the database, each under its own
// source's write guard, in one UPDATE. Fifty sources at a trickle then cost a few mark commits a
// second, not one a row. A mark a batch carried (its assign) is withdrawn. Thread-safe: the relay
// and prefetch threads of the database's sources call it.
class JointMarks {
 public:
  // Offers go to the state rows of `database` (the sources' own), through `pool`, which outlives this.
  JointMarks(db::ConnectionPool& pool, std::string database);

  // `source`'s acks through `mark`, to be written under `guard` (which must hold a lease) by the
  // next write() on the database, whoever's. A later offer replaces an earlier one.
  void offer(const std::string& source, const WriteGuard& guard, PublishedMark mark);
  // `source` wrote its marks through `version` itself (a batch carried them, or a mark alone):
  // nothing of it to write up to there.
  void carried(const std::string& source, uint64_t version);
  // `source`'s session ended: its offer goes (a new session offers under its own guard), once no
  // write that took it is still running.
  void forget(const std::string& source);
  // Makes `source`'s offer durable: writes it with every other offer of the database that has
  // waited kRipe, in one statement, or nothing when `source`'s has been written already (by
  // another source's write, or carried). A younger offer is left to its own source's next batch
  // (a busy source's acks ride on its assigns; writing them here would only wait on its rows'
  // locks). A guard that no longer holds moves nothing of its source, like a mark alone. On
  // failure the offers stay for the next write.
  Status write(const std::string& source);
  static constexpr std::chrono::milliseconds kRipe{100};

  // Statements written so far, and the marks they wrote.
  uint64_t statements() const;
  uint64_t marks() const;

 private:
  struct Offer {
    WriteGuard guard;
    PublishedMark mark;
    std::chrono::steady_clock::time_point since;  // offered first above what is written
  };
  // The offers not yet written that have waited kRipe, and `source`'s. GUARDED_BY(mu_)
  std::map<std::string, Offer> pending(const std::string& source) const;
  static std::string updateOf(db::Connection& conn, const std::map<std::string, Offer>& offers);

  std::mutex writeMu_;   // one write at a time; a relay waiting here often finds its mark written
  db::Session session_;  // GUARDED_BY(writeMu_)
  mutable std::mutex mu_;
  std::map<std::string, Offer> offers_;     // by source, the latest, GUARDED_BY(mu_)
  std::map<std::string, uint64_t> written_;  // by source, the version written or carried, GUARDED_BY(mu_)
  uint64_t statements_ = 0;              // GUARDED_BY(mu_)
  uint64_t marks_ = 0;                   // GUARDED_BY(mu_)
};

}  // namespace outbox
