#include "common/status.h"

namespace outbox {

std::string Status::toString() const {
  switch (code_) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kTransient: return "transient: " + message_;
    case StatusCode::kPermanent: return "permanent: " + message_;
    case StatusCode::kFatal: return "fatal: " + message_;
    case StatusCode::kRejected: return "rejected: " + message_;
  }
  return message_;
}

}  // namespace outbox
