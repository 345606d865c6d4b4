#include "db/pool.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace outbox::db {

ConnectionPool::ConnectionPool(ConnectParams params, size_t capacity, Setup setup)
    : params_(std::move(params)), capacity_(std::max<size_t>(1, capacity)), setup_(std::move(setup)) {}

// Every loan is given back before its pool goes (the pools outlive the stores that borrow).
ConnectionPool::~ConnectionPool() = default;

ConnectionPool::Loan::Loan(Loan&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), conn_(std::move(other.conn_)), serial_(other.serial_) {}

ConnectionPool::Loan& ConnectionPool::Loan::operator=(Loan&& other) noexcept {
  if (this != &other) {
    giveBack();
    pool_ = std::exchange(other.pool_, nullptr);
    conn_ = std::move(other.conn_);
    serial_ = other.serial_;
  }
  return *this;
}

ConnectionPool::Loan::~Loan() { giveBack(); }

void ConnectionPool::Loan::giveBack() {
  if (pool_ == nullptr) return;
  ConnectionPool* pool = std::exchange(pool_, nullptr);
  pool->giveBack(std::move(conn_), serial_);
}

void ConnectionPool::Loan::discard() {
  conn_.reset();
  giveBack();
}

void ConnectionPool::giveBack(std::unique_ptr<Connection> conn, uint64_t serial) {
  // A transaction left open would carry one borrower's locks and snapshot into the next's calls.
  if (conn && (conn->failed() || conn->inTransaction())) {
    conn->rollback();
    if (conn->failed() || conn->inTransaction()) conn.reset();
  }
  {
    std::lock_guard lock(mu_);
    if (conn) {
      idle_.push_back(Idle{std::move(conn), serial, std::chrono::steady_clock::now()});
    } else {
      --open_;
    }
  }
  cv_.notify_one();
}

void ConnectionPool::closed(const Status& failure) {
  {
    std::lock_guard lock(mu_);
    --open_;
    openFailure_ = failure;
    openFailedAt_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

Result<ConnectionPool::Loan> ConnectionPool::borrow(const std::string& database, uint64_t preferred, Use use) {
  const bool autocommit = use == Use::kStatements;
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  if (std::vector<Idle> expired = takeExpired(now); !expired.empty()) {
    lock.unlock();
    expired.clear();  // closed outside the lock (each says goodbye to the server)
    lock.lock();
  }
  bool counted = false;
  while (idle_.empty() && open_ >= capacity_) {
    if (!counted) ++waits_;
    counted = true;
    cv_.wait(lock);
  }
  // The one this borrower had last, else one already on its database, else the one given back
  // last (the others may rest long enough for the server to close them: MySQL's wait_timeout).
  auto choose = [&](bool set) {
    auto pick = std::find_if(idle_.begin(), idle_.end(), [&](const Idle& i) {
      return i.conn->autocommit() == set && i.serial == preferred;
    });
    if (pick == idle_.end()) {
      pick = std::find_if(idle_.begin(), idle_.end(), [&](const Idle& i) {
        return i.conn->autocommit() == set && i.conn->database() == database;
      });
    }
    if (pick != idle_.end()) return pick;
    for (auto last = idle_.end(); last != idle_.begin();) {
      if ((--last)->conn->autocommit() == set) return last;
    }
    return idle_.end();
  };
  const bool openFailureHeld = openFailedAt_ && now - *openFailedAt_ < kOpenFailureHeld;
  auto pick = choose(autocommit);
  // One set the other way only when no new one may be opened: a source's reads and its assigns
  // would otherwise set one connection back and forth, two statements a batch.
  if (pick == idle_.end() && (open_ >= capacity_ || openFailureHeld)) pick = choose(!autocommit);
  if (pick != idle_.end()) {
    Idle taken = std::move(*pick);
    idle_.erase(pick);
    lock.unlock();
    Loan loan(this, std::move(taken.conn), taken.serial);
    Status s = loan->useDatabase(database);
    if (s.isOk()) s = loan->setAutocommit(autocommit);
    if (!s.isOk()) {
      loan.discard();
      return s;
    }
    return loan;
  }
  // A connect that just failed is not tried again by each waiter in turn (with a 5 s connect
  // timeout and a server gone, a few hundred relays would take minutes to hear it): for a second
  // the borrowers get its failure at once.
  if (openFailureHeld) return openFailure_;
  ++open_;
  const uint64_t serial = nextSerial_++;
  lock.unlock();
  // Opened outside the lock: a slow server must not hold up borrowers of idle connections.
  ConnectParams params = params_;
  params.database = database;
  auto opened = Connection::open(params);
  if (!opened.isOk()) {
    closed(opened.status());
    return opened.status();
  }
  std::unique_ptr<Connection> conn = std::move(opened).value();
  Status s = setup_ ? setup_(*conn) : Status::ok();
  if (s.isOk()) s = conn->setAutocommit(autocommit);
  if (!s.isOk()) {
    closed(s);
    return s;
  }
  {
    std::lock_guard relock(mu_);
    openFailedAt_.reset();
  }
  return Loan(this, std::move(conn), serial);
}

std::vector<ConnectionPool::Idle> ConnectionPool::takeExpired(std::chrono::steady_clock::time_point now) {
  std::vector<Idle> expired;
  for (auto it = idle_.begin(); it != idle_.end();) {
    const auto limit = it->conn->idleLimit();
    if (limit.count() > 0 && 4 * (now - it->since) >= 3 * limit) {
      expired.push_back(std::move(*it));
      it = idle_.erase(it);
      --open_;
    } else {
      ++it;
    }
  }
  return expired;
}

size_t ConnectionPool::openConnections() const {
  std::lock_guard lock(mu_);
  return open_;
}

uint64_t ConnectionPool::waits() const {
  std::lock_guard lock(mu_);
  return waits_;
}

namespace {

// What tells two accounts on servers apart. The password is in it (two passwords of one user are
// two accounts as far as the pool knows); the key never leaves this object.
std::string serverKey(const ConnectParams& p) {
  std::string key;
  for (const std::string* part : {&p.host, &p.socket, &p.user, &p.password, &p.sslCa, &p.sslCert, &p.sslKey}) {
    key += std::to_string(part->size());
    key += ':';
    key += *part;
  }
  return key + fmt::format("|{}|{}|{}|{}", p.port, static_cast<int>(p.sslMode), p.connectTimeout.count(),
                           p.readTimeout.count());
}

}  // namespace

ConnectionPool& ConnectionPools::forServer(const ConnectParams& params) {
  std::lock_guard lock(mu_);
  auto& pool = pools_[serverKey(params)];
  if (!pool) pool = std::make_unique<ConnectionPool>(params, capacity_, setup_);
  return *pool;
}

ConnectionPools::Usage ConnectionPools::usage() const {
  std::lock_guard lock(mu_);
  Usage u;
  for (const auto& [key, pool] : pools_) {
    u.open += pool->openConnections();
    u.limit += pool->capacity();
    u.waits += pool->waits();
  }
  return u;
}

size_t ConnectionPools::openConnections() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [key, pool] : pools_) n += pool->openConnections();
  return n;
}

}  // namespace outbox::db
