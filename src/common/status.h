#pragma once

#include <optional>
#include <string>
#include <utility>

namespace outbox {

// What a caller does next with a failure:
//   kTransient — retry with backoff (a connection went away, a lock wait timed out);
//   kPermanent — stop this source until an operator acts (poison row, restored database);
//   kFatal     — the process cannot go on (bad config discovered late, a bug);
//   kRejected  — an operator's request refused as asked, nothing changed (quarantining a row that
//                already has a version): asking again will not help, asking otherwise may.
enum class StatusCode { kOk, kTransient, kPermanent, kFatal, kRejected };

// What a failure was, where the converter that met it knows (fromMysql, fromNats): callers ask
// this, never an error number or the message's text.
//   kLockWait      — a row lock another transaction holds: a lock wait timed out, or a NOWAIT
//                    read met it; asking again may work once it is released;
//   kRolledBack    — the server rolled the transaction back to settle a conflict (a deadlock, or
//                    MariaDB 11.6+'s innodb_snapshot_isolation, error 1020): running it again is
//                    the answer;
//   kConnection    — the server went away, or never answered: asking again on a new connection;
//   kMissingTable  — a table or column the statement names does not exist (a schema not migrated);
//   kAccessDenied  — a privilege or a login refused;
//   kDuplicateKey  — a row with that unique key exists already;
//   kServer        — any other error the server reported.
//   kScanAgain     — not an error: what a batch's read took for granted no longer holds (a row of
//                    it has a version, or is quarantined): the relay's session starts over and
//                    scans again; the db::Session keeps its connection (rolled back).
enum class Cause {
  kNone,
  kLockWait,
  kRolledBack,
  kConnection,
  kMissingTable,
  kAccessDenied,
  kDuplicateKey,
  kServer,
  kScanAgain
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return {}; }
  static Status transient(std::string message) { return {StatusCode::kTransient, std::move(message)}; }
  static Status permanent(std::string message) { return {StatusCode::kPermanent, std::move(message)}; }
  static Status fatal(std::string message) { return {StatusCode::kFatal, std::move(message)}; }
  static Status rejected(std::string message) { return {StatusCode::kRejected, std::move(message)}; }
  // The same failure, with what it was.
  Status because(Cause cause) && {
    cause_ = cause;
    return std::move(*this);
  }

  bool isOk() const { return code_ == StatusCode::kOk; }
  bool isTransient() const { return code_ == StatusCode::kTransient; }
  bool isPermanent() const { return code_ == StatusCode::kPermanent; }
  bool isRejected() const { return code_ == StatusCode::kRejected; }
  StatusCode code() const { return code_; }
  Cause cause() const { return cause_; }
  // Another transaction holds or held what this one needed (kLockWait or kRolledBack).
  bool isLockConflict() const { return cause_ == Cause::kLockWait || cause_ == Cause::kRolledBack; }
  const std::string& message() const { return message_; }
  std::string toString() const;

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  Cause cause_ = Cause::kNone;
  std::string message_;
};

// A value or the Status that says why there is none. Never both.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool isOk() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace outbox

// Returns early with the Status of an expression that failed.
#define OUTBOX_RETURN_IF_ERROR(expr)      \
  do {                                    \
    ::outbox::Status status_ = (expr);    \
    if (!status_.isOk()) return status_;  \
  } while (0)
