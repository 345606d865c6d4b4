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
  // Open connections per listener. At the limit a new connection closes the one that has waited
  // longest for its request (a slow or idle client), or is refused when every one is being served.
  size_t maxConnections = 256;
};

// HTTP/1.1 listeners (Boost.Beast) on one I/O thread of their own. The I/O thread only reads
// requests and writes answers; handlers run where `Dispatch` sends them.
class HttpTransport {
 public:
  // Gives the answer to a request; call it once. A plain answer is queued for writing (any thread,
  // the I/O thread included); a streamed one is written before it returns (never on the I/O
  // thread). Dropping it unanswered closes the connection.
  using Reply = std::function<void(HttpResponse)>;
  // A request read in full, on the I/O thread: must not block (hand the work to a pool).
  using Dispatch = std::function<void(HttpRequest request, Reply reply)>;
  // Every answer given, the transport's own (400, 408, 413, 414) included, with as much of the
  // request as was read (an empty method when not even the request line was): for the audit log.
  using Answered = std::function<void(const HttpRequest& request, int status)>;

  explicit HttpTransport(HttpLimits limits);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds host:port (0: any free port) and returns the port; HTTPS when tlsCert and tlsKey (PEM
  // paths) are set. Fails when the address cannot be bound or the certificate not loaded. Call
  // before start().
  Result<int> listen(const std::string& host, int port, const std::string& tlsCert,
                     const std::string& tlsKey, Dispatch dispatch, Answered answered);
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
