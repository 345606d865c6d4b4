#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "db/session.h"

namespace outbox {

// The heartbeats of the sources of one database that this process leads, in one round of two
// statements instead of two each (docs/design.md, "The heartbeats of a database in one round"): a steady
// leader's renewal — nobody lighter, the lease still ours at the epoch we hold — joins the others
// that fall due within a short gathering window (the leases' heartbeats are aligned, so they fall
// due together). One reads the candidates of every source of the round, one UPDATE renews exactly
// the leases (source, holder, lease epoch) and candidacies of those with nobody lighter. Whatever
// the round cannot vouch for — a lighter candidate, a lease not matched, an error — is left to the
// source's own full round trip, which decides as before. Thread-safe: the relay threads of the
// database's sources call it.
class JointRenewal {
 public:
  // `fresh`: a candidate renewed longer ago than this is taken for dead (MysqlLeaseStore's);
  // `gather`: how long the first of a round waits for the others.
  JointRenewal(db::ConnectionPool& pool, std::string database, std::chrono::milliseconds fresh,
               std::chrono::milliseconds gather = std::chrono::milliseconds(10));

  // True: the lease of `source` held by `holder` at `leaseEpoch` and its candidacy were renewed for
  // `ttl`, with nobody lighter among its candidates. False: not vouched for; do the full round trip.
  Result<bool> renew(const std::string& source, const std::string& holder, uint64_t leaseEpoch,
                     std::chrono::milliseconds ttl);

  // Rounds run, and renewals they vouched for, so far.
  uint64_t rounds() const;
  uint64_t renewed() const;

 private:
  struct Member {
    std::string source;
    std::string holder;
    uint64_t leaseEpoch = 0;
    std::chrono::milliseconds ttl{0};
    bool done = false;
    Result<bool> result = false;
  };
  // One round for `batch` (same holder and ttl as its first; others are not vouched for); `sweep`
  // gets the sources whose dead candidacies are due to be swept after it.
  void runRound(std::vector<Member*>& batch, std::string& sweep);
  Status roundStatements(db::Connection& conn, std::vector<Member*>& batch, std::string& sweep);
  // How long the joint stays off after the candidate table could not be used.
  static constexpr std::chrono::minutes kOffFor{10};

  std::mutex sessionMu_;  // one round at a time on the session
  db::Session session_;   // GUARDED_BY(sessionMu_)
  std::chrono::milliseconds fresh_;
  std::chrono::milliseconds gather_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Member*> gathering_;  // GUARDED_BY(mu_)
  bool gatherOpen_ = false;         // GUARDED_BY(mu_)
  uint64_t rounds_ = 0;             // GUARDED_BY(mu_)
  uint64_t renewed_ = 0;            // GUARDED_BY(mu_)
  std::optional<std::chrono::steady_clock::time_point> offUntil_;  // GUARDED_BY(mu_)
};

}  // namespace outbox
