#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "http/message.h"

namespace outbox {

// What every client is held to (issue 24, items 15-17). A request that breaks a limit is answered
// (400, 408, 413, 414) and its connection closed: nothing of it is read as a next request.
struct HttpLimits {
  // The whole request, headers and body, from the connection's start (or the previous answer)
  // to its last byte: a client that sends a byte a second is cut off here, not served.
  std::chrono::milliseconds requestTimeout{5000};
  // Each write of an answer (a client that takes nothing for this long is dropped).
  std::chrono::milliseconds writeTimeout{10000};
  size_t maxUriBytes = 8192;          // 414 past it
  size_t maxHeaderBytes = 16 * 1024;  // request line and headers; 413 past it
  size_t maxHeaders = 100;            // 413 past it
  size_t maxBodyBytes = 16 * 1024;    // 413 past it
  // Open connections per listener, not counting those answered and closing (they drain for at
  // most a second, and are closed at once when as many close as the limit). At the limit a new
  // connection closes the one that has waited longest for its request (a slow or idle client);
  // when every one is being served it takes one of `reservedConnections` more, which serve one
  // request of the listener's reserved paths (the health routes) and close; past those it is
  // refused.
  size_t maxConnections = 256;
  size_t reservedConnections = 32;
};

// HTTP/1.1 listeners (Boost.Beast) on one I/O thread of their own. The I/O thread only reads
// requests and writes answers; handlers run where `Dispatch` sends them. Framing follows RFC 9112:
// a request whose Transfer-Encoding does not end in chunked (or any in HTTP/1.0), or an HTTP/1.1
// request without exactly one Host (more than one in HTTP/1.0), is answered 400 and closed.
class HttpTransport {
 public:
  // Gives the answer to a request; call it once. A plain answer is queued for writing (any thread,
  // the I/O thread included); a streamed one is written before it returns (never on the I/O
  // thread), as HTTP/1.1 chunks or, to an HTTP/1.0 client, ended by closing the connection. A
  // stream that is not written (the answer to HEAD) is released before it returns, on the calling
  // thread: never call it with a stream on the I/O thread. Dropping it unanswered closes the
  // connection.
  using Reply = std::function<void(HttpResponse)>;
  // A request read in full, on the I/O thread: must not block (hand the work to a pool).
  using Dispatch = std::function<void(HttpRequest request, Reply reply)>;
  // Every answer given, the transport's own (400, 408, 413, 414, 503 past the reserve) included,
  // with as much of the request as was read (its headers once they were; an empty method when not
  // even the request line was): for the audit log. Called on the I/O thread or the replying one:
  // must not block (hand the logging to a pool).
  using Answered = std::function<void(const HttpRequest& request, int status)>;
  // Whether a path is one the reserved connections serve (see HttpLimits::reservedConnections).
  using Reserved = std::function<bool(const std::string& path)>;

  explicit HttpTransport(HttpLimits limits);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds host:port (0: any free port) and returns the port; HTTPS when tlsCert and tlsKey (PEM
  // paths) are set. Fails when the address cannot be bound or the certificate not loaded. Call
  // before start(). `answered` may be null; `reserved` null reserves nothing.
  Result<int> listen(const std::string& host, int port, const std::string& tlsCert,
                     const std::string& tlsKey, Dispatch dispatch, Answered answered,
                     Reserved reserved);
  void start();
  // Stops accepting and closes every connection (writes in flight fail at once); does not wait.
  void shutdown();
  // shutdown(), then waits for the I/O thread. Call after the threads that may still Reply ended.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox
