#include "db/session.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace outbox::db {

Session::Session(ConnectParams params, Setup setup) : params_(std::move(params)), setup_(std::move(setup)) {}

Session::Session(ConnectionPool& pool, std::string database, Setup prepare)
    : setup_(std::move(prepare)), pool_(&pool), database_(std::move(database)) {}

Session::~Session() = default;

Result<Connection*> Session::connection(Use use) {
  if (pool_ != nullptr) {
    uint64_t& last = lastSerial_[use == Use::kStatements ? 0 : 1];
    if (!loan_) {
      auto borrowed = pool_->borrow(database_, last, use);
      if (!borrowed.isOk()) return borrowed.status();
      loan_ = std::move(borrowed).value();
      last = loan_.serial();
    } else if (use == Use::kStatements && inTransactionCall_) {
      // A run() inside a transaction's call would share its connection: a failure dropping it, a
      // rollback retrying only the inner call. A caller's bug.
      return Status::fatal("internal error (a bug: please report it): Session::run inside Session::transaction");
    } else if (use == Use::kStatements && !loan_->autocommit() && !loan_->inTransaction()) {
      // Held since a transaction: a statement on it now must commit by itself.
      if (Status s = loan_->setAutocommit(true); !s.isOk()) {
        drop();
        return s;
      }
    }
    if (!prepared_ && setup_) {
      Status s = setup_(*loan_);
      // On a connection lent for transactions (autocommit off) the prepare's statements began one:
      // committed now, not holding their locks through the caller's transaction.
      if (s.isOk() && loan_->inTransaction()) s = loan_->commit();
      if (!s.isOk()) {
        drop();
        return s;
      }
    }
    prepared_ = true;
    // Outside a Hold or run() the loan would go back at once, and the pointer with it.
    if (holds_ == 0) {
      giveBack();
      return Status::fatal("Session::connection() on a pool's session outside a Hold");
    }
    return &*loan_;
  }
  if (conn_) return conn_.get();
  auto opened = Connection::open(params_);
  if (!opened.isOk()) return opened.status();
  std::unique_ptr<Connection> conn = std::move(opened).value();
  if (setup_) OUTBOX_RETURN_IF_ERROR(setup_(*conn));
  conn_ = std::move(conn);
  return conn_.get();
}

void Session::drop() {
  conn_.reset();
  if (loan_) loan_.discard();
  loan_ = ConnectionPool::Loan();
  prepared_ = false;
}

void Session::giveBack() {
  if (loan_) loan_ = ConnectionPool::Loan();
}

void Session::dropIfBroken(const Status& s) {
  if (pool_ != nullptr) {
    // A shared connection after a failed call may hold what the next borrower must not inherit
    // (a transaction's characteristics set for a statement that never ran): it is not lent again.
    // Nor one a call left inside a transaction: the pool would roll its writes back.
    if (s.isOk() && loan_ && loan_->inTransaction()) {
      spdlog::error("a call left a transaction open on a shared connection: closed, its writes rolled back");
    } else if (s.isOk()) {
      return;
    }
    drop();
    return;
  }
  if (s.isTransient() && conn_ && conn_->failed()) conn_.reset();
}

Status Session::transaction(const std::function<Status(Connection&)>& fn, Begin begin) {
  Hold hold(*this);
  struct InCall {
    bool& flag;
    bool was;
    explicit InCall(bool& f) : flag(f), was(std::exchange(f, true)) {}
    ~InCall() { flag = was; }
  } inCall(inTransactionCall_);
  for (int attempt = 1;; ++attempt) {
    auto conn = connection(Use::kTransactions);
    if (!conn.isOk()) return conn.status();
    Connection& c = **conn;
    Status s = begin == Begin::kBySession && c.autocommit() ? c.begin() : Status::ok();
    if (s.isOk()) {
      try {
        s = fn(c);
      } catch (...) {  // a bug (relay/batch.h, catchingWork): its writes must not be committed by the next begin()
        c.rollback();
        drop();
        throw;
      }
    }
    // A function that was to begin and did not has written row by row: nothing to undo now.
    if (s.isOk() && begin == Begin::kByFn && !c.inTransaction()) {
      s = Status::permanent("internal error (a bug: please report it): a transaction's function began none");
    }
    if (s.isOk()) s = c.commit();
    if (s.isOk()) return s;
    c.rollback();
    if (s.cause() == Cause::kRolledBack && attempt < kRolledBackTries) continue;
    // A refusal asking for a new scan says nothing of the connection: rolled back, it is kept (a
    // new one costs a TLS handshake, a login and the prepare's statements).
    if (s.cause() == Cause::kScanAgain && !c.failed() && !c.inTransaction()) return s;
    if (pool_ != nullptr || s.isTransient()) drop();
    return s;
  }
}

}  // namespace outbox::db
