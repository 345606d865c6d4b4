#pragma once

// What a Beast listener and its connections share (session.h, transport.cpp): the listener's
// limits and callbacks, and the connection as admission and shutdown see it. Included with
// session.h by transport.cpp only (the only code that includes Beast).

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <optional>

#include "http/admission.h"
#include "http/transport.h"

namespace outbox::http_detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// The target's path and query into r.path and r.params, percent-decoded (request.cpp).
void splitTarget(HttpRequest& r);

// What a listener's connections share. Touched on the I/O thread only, but for `answered`,
// which any thread may call.
struct ListenerState {
  HttpLimits limits;
  HttpTransport::Dispatch dispatch;
  HttpTransport::Answered answered;
  HttpTransport::Reserved reserved;
  std::optional<net::ssl::context> tls;
};

// A connection as its listener sees it, for admission and shutdown. I/O thread only.
class Connection {
 public:
  using Phase = ConnectionPhase;
  virtual ~Connection() = default;
  virtual void close() = 0;
  virtual Phase phase() const = 0;
  virtual Clock::time_point phaseSince() const = 0;
  // Admitted past the limit: serves one request of a reserved path, then closes.
  virtual bool reserved() const = 0;
};

}  // namespace outbox::http_detail
