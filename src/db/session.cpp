#include "db/session.h"

namespace outbox::db {

Session::Session(ConnectParams params, Setup setup) : params_(std::move(params)), setup_(std::move(setup)) {}

Result<Connection*> Session::connection() {
  if (conn_) return conn_.get();
  auto opened = Connection::open(params_);
  if (!opened.isOk()) return opened.status();
  std::unique_ptr<Connection> conn = std::move(opened).value();
  if (setup_) OUTBOX_RETURN_IF_ERROR(setup_(*conn));
  conn_ = std::move(conn);
  return conn_.get();
}

void Session::dropIfBroken(const Status& s) {
  if (s.isTransient() && conn_ && conn_->failed()) conn_.reset();
}

Status Session::transaction(const std::function<Status(Connection&)>& fn) {
  for (int attempt = 1;; ++attempt) {
    auto conn = connection();
    if (!conn.isOk()) return conn.status();
    Connection& c = **conn;
    Status s = c.begin();
    if (s.isOk()) s = fn(c);
    if (s.isOk()) s = c.commit();
    if (s.isOk()) return s;
    c.rollback();
    if (s.cause() == Cause::kRolledBack && attempt < kRolledBackTries) continue;
    if (s.isTransient()) conn_.reset();
    return s;
  }
}

}  // namespace outbox::db
