#pragma once

#include <string>
#include <string_view>

#include "common/json.h"
#include "http/message.h"

namespace outbox {

// The HTTP server's JSON answers: an error is {"error": "..."} with its status code, valid JSON
// whatever bytes the message repeats from the request.
inline void jsonError(HttpResponse& res, int status, std::string_view message) {
  res.status = status;
  res.setContent("{\"error\":" + jsonQuoted(message) + "}", "application/json");
}

}  // namespace outbox
