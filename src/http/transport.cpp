// The HTTP transport on Boost.Beast: listeners, admission and shutdown here, a connection's
// reading and writing in session.h, what they share in listener.h (the only other files that
// include Beast). cpp-httplib 0.11 (Debian's) parses in its shared library with no deadline for
// a request's headers, no limit on their number and a thread per connection, so slow or flooding
// clients froze it (issue 24, 15-17).
#include "http/transport.h"

#include <fmt/format.h>

#include <atomic>
#include <list>
#include <thread>

#include "http/admission.h"
#include "http/session.h"

namespace outbox {

using namespace http_detail;

struct HttpTransport::Impl {
  struct Listener {
    ListenerState state;
    std::optional<tcp::acceptor> acceptor;
    std::list<std::weak_ptr<Connection>> connections;  // I/O thread only
  };

  explicit Impl(HttpLimits l) : limits(l) {}

  // Applies admit() (admission.h) to a new connection on `l`: what it closes, and whether (and
  // into which place) the new one is admitted.
  Admission admitNew(Listener& l) {
    l.connections.remove_if([](const auto& c) { return c.expired(); });
    std::vector<std::shared_ptr<Connection>> live;
    std::vector<OpenConnection> open;
    for (const auto& weak : l.connections) {
      if (auto c = weak.lock()) {
        open.push_back({c->phase(), c->phaseSince(), c->reserved()});
        live.push_back(std::move(c));
      }
    }
    Admission a = admit(open, limits.maxConnections, limits.reservedConnections);
    if (a.closeClosing) live[*a.closeClosing]->close();
    if (a.evict) live[*a.evict]->close();
    return a;
  }

  void accept(Listener& l) {
    l.acceptor->async_accept(ioc, [this, &l](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !l.acceptor->is_open()) return;
      if (ec) {  // out of descriptors, say: try again shortly instead of spinning
        auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(100));
        timer->async_wait([this, &l, timer](beast::error_code) {
          if (l.acceptor->is_open()) accept(l);
        });
        return;
      }
      if (Admission a = admitNew(l); a.admitted) {
        beast::error_code ignored;
        std::string remote = socket.remote_endpoint(ignored).address().to_string(ignored);
        beast::tcp_stream stream(std::move(socket));
        std::shared_ptr<Connection> session;
        if (l.state.tls) {
          auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
              beast::ssl_stream<beast::tcp_stream>(std::move(stream), *l.state.tls), l.state,
              remote, a.reserved);
          s->start();
          session = s;
        } else {
          auto s = std::make_shared<Session<beast::tcp_stream>>(std::move(stream), l.state, remote,
                                                                a.reserved);
          s->start();
          session = s;
        }
        l.connections.push_back(session);
      }
      accept(l);
    });
  }

  HttpLimits limits;
  // Declared before the io_context: handlers it still holds refer to the listeners.
  std::list<Listener> listeners;
  net::io_context ioc{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread thread;
  std::atomic<bool> shutDown{false};
};

HttpTransport::HttpTransport(HttpLimits limits) : impl_(std::make_unique<Impl>(limits)) {}

HttpTransport::~HttpTransport() { stop(); }

Result<int> HttpTransport::listen(const std::string& host, int port, const std::string& tlsCert,
                                  const std::string& tlsKey, Dispatch dispatch, Answered answered,
                                  Reserved reserved) {
  auto& l = impl_->listeners.emplace_back();
  l.state.limits = impl_->limits;
  l.state.dispatch = std::move(dispatch);
  l.state.answered = std::move(answered);
  l.state.reserved = std::move(reserved);
  if (!tlsCert.empty() || !tlsKey.empty()) {
    l.state.tls.emplace(net::ssl::context::tls_server);
    l.state.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                             net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                             net::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    l.state.tls->use_certificate_chain_file(tlsCert, ec);
    if (!ec) l.state.tls->use_private_key_file(tlsKey, net::ssl::context::pem, ec);
    if (ec) {
      impl_->listeners.pop_back();
      return Status::permanent(
          fmt::format("http.tls_cert, http.tls_key: cannot load the certificate {} with the key {} "
                      "(PEM files, the key matching the certificate)",
                      tlsCert, tlsKey));
    }
  }
  beast::error_code ec;
  auto address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (!ec) {
    l.acceptor.emplace(impl_->ioc);
    tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    l.acceptor->open(endpoint.protocol(), ec);
    if (!ec) l.acceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) l.acceptor->bind(endpoint, ec);
    if (!ec) l.acceptor->listen(net::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    impl_->listeners.pop_back();
    return Status::fatal(fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  }
  return static_cast<int>(l.acceptor->local_endpoint().port());
}

void HttpTransport::start() {
  impl_->work.emplace(impl_->ioc.get_executor());
  for (auto& l : impl_->listeners) impl_->accept(l);
  impl_->thread = std::thread([this] { impl_->ioc.run(); });
}

void HttpTransport::shutdown() {
  if (impl_->shutDown.exchange(true)) return;
  net::post(impl_->ioc, [impl = impl_.get()] {
    for (auto& l : impl->listeners) {
      beast::error_code ignored;
      if (l.acceptor) l.acceptor->close(ignored);
      for (const auto& weak : l.connections) {
        if (auto c = weak.lock()) c->close();
      }
    }
  });
}

void HttpTransport::stop() {
  shutdown();
  if (!impl_->thread.joinable()) return;
  // Every operation was cancelled: the loop ends once their handlers ran; a drain or a write still
  // waiting ends with its timeout, and no later than a second the loop is stopped outright.
  impl_->work.reset();
  for (int i = 0; i < 1000 && !impl_->ioc.stopped(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->ioc.stop();
  impl_->thread.join();
}

}  // namespace outbox
