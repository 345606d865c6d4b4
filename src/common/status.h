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

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return {}; }
  static Status transient(std::string message) { return {StatusCode::kTransient, std::move(message)}; }
  static Status permanent(std::string message) { return {StatusCode::kPermanent, std::move(message)}; }
  static Status fatal(std::string message) { return {StatusCode::kFatal, std::move(message)}; }
  static Status rejected(std::string message) { return {StatusCode::kRejected, std::move(message)}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  bool isTransient() const { return code_ == StatusCode::kTransient; }
  bool isPermanent() const { return code_ == StatusCode::kPermanent; }
  bool isRejected() const { return code_ == StatusCode::kRejected; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string toString() const;

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
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
