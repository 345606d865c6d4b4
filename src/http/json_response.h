#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

#include "common/json.h"

namespace outbox {

// The HTTP server's JSON answers: an error is {"error": "..."} with its status code.
inline void jsonError(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content("{\"error\":" + jsonQuoted(message) + "}", "application/json");
}

}  // namespace outbox
