#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox {

// A request as the transport read it in full: headers within their limits and the whole body.
struct HttpRequest {
  std::string method;                         // as sent ("GET", "POST", ...)
  std::string target;                         // as sent, query included
  std::string path;                           // the target's path, percent-decoded
  std::map<std::string, std::string> params;  // the query, decoded (the last of a repeated key)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remoteAddr;
  std::vector<std::string> matches;  // the route's pattern groups; [0] is the whole path

  // The first header of that name (case-insensitive), "" when none.
  std::string header(std::string_view name) const;
  bool hasHeader(std::string_view name) const;
  bool hasParam(const std::string& key) const { return params.count(key) != 0; }
};

// The answer to a request: a body in full, or one written piece by piece (chunked).
struct HttpResponse {
  // Writes a piece of a streamed body; false when the client is gone or too slow.
  using Write = std::function<bool(std::string_view)>;

  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string contentType;
  std::string body;
  // When set, the body, of a length not known beforehand: called once on a worker thread with
  // `write`; returns true when the whole body was written (false cuts the answer short and closes
  // the connection). Not called for HEAD; whatever it owns is released on the worker that replied
  // (never on the I/O thread), whether it was called or not.
  std::function<bool(const Write& write)> stream;
  bool close = false;  // close the connection after this answer

  void setHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void setContent(std::string content, std::string type) {
    body = std::move(content);
    contentType = std::move(type);
  }
};

}  // namespace outbox
