#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace outbox {

// Where a connection is in its life, as admission sees it.
enum class ConnectionPhase {
  kWaiting,  // for (the rest of) a request, or the TLS handshake: may be evicted
  kServing,  // its request is being handled or answered
  kClosing,  // answered, draining what the client still sends before the close
};

struct OpenConnection {
  ConnectionPhase phase = ConnectionPhase::kWaiting;
  std::chrono::steady_clock::time_point since;  // when it entered its phase
  bool reserved = false;  // admitted past the limit: serves one request of a reserved path
};

// What to do with a new connection, and with which open ones (indexes into the list given).
struct Admission {
  bool admitted = false;
  bool reserved = false;               // it takes a reserved place
  std::optional<size_t> evict;         // a waiting connection to close to make room
  std::optional<size_t> closeClosing;  // a closing connection to close at once
};

// Who makes room for a new connection on a listener whose connections are `open` (HttpLimits).
// Connections answered and closing count against no limit, so a flood that is answered and holds
// its sockets cannot starve the others; when `maxConnections` of them are closing, the oldest is
// closed at once. Of the rest, at most `maxConnections` take a normal place: at the limit the one
// that has waited longest for its request makes room; when every one is being served the new one
// takes one of `reservedConnections` more places (the transport serves only the health routes
// there), and past those it is refused. Pure; the transport applies the answer.
Admission admit(const std::vector<OpenConnection>& open, size_t maxConnections, size_t reservedConnections);

}  // namespace outbox
