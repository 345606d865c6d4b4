// The HTTP transport on Boost.Beast: the only file that includes it. cpp-httplib 0.11 (Debian's)
// parses in its shared library with no deadline for a request's headers, no limit on their
// number and a thread per connection, so slow or flooding clients froze it (issue 24, 15-17).
#include "http/transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <future>
#include <list>
#include <optional>
#include <thread>

#include "http/json_response.h"

namespace outbox {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// Bytes a closing connection still reads (and drops) after its last answer, for at most a second,
// so that closing on unread bytes does not reset the connection before the client reads the answer.
constexpr size_t kDrainBytes = 64 * 1024;
constexpr std::chrono::seconds kDrainTime{1};
// Pieces of a streamed body are gathered up to this size before a write.
constexpr size_t kStreamChunk = 64 * 1024;

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded (a malformed escape kept as it is); '+' as a space when `plusIsSpace` (a query).
std::string percentDecoded(std::string_view text, bool plusIsSpace) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hexValue(text[i + 1]) >= 0 &&
        hexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hexValue(text[i + 1]) * 16 + hexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(plusIsSpace && text[i] == '+' ? ' ' : text[i]);
    }
  }
  return out;
}

void splitTarget(HttpRequest& r) {
  std::string_view target = r.target;
  size_t q = target.find('?');
  r.path = percentDecoded(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (!pair.empty()) {
      r.params[percentDecoded(pair.substr(0, eq), true)] =
          eq == std::string_view::npos ? std::string() : percentDecoded(pair.substr(eq + 1), true);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (equalsIgnoringCase(key, name)) return value;
  }
  return {};
}

bool HttpRequest::hasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return equalsIgnoringCase(h.first, name); });
}

namespace {

// What a listener's connections share. Touched on the I/O thread only.
struct ListenerState {
  HttpLimits limits;
  HttpTransport::Dispatch dispatch;
  HttpTransport::Answered answered;
  std::optional<net::ssl::context> tls;
};

// A connection as its listener sees it, for the connection limit and for shutdown.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void close() = 0;
  // Since when it has waited for (the rest of) a request; nullopt while one is being served.
  virtual std::optional<Clock::time_point> waitingSince() const = 0;
};

template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, ListenerState& listener, std::string remote)
      : stream_(std::move(stream)),
        listener_(listener),
        limits_(listener.limits),
        remote_(std::move(remote)),
        buffer_(limits_.maxHeaderBytes + 4096),
        deadlineTimer_(lowest().get_executor()) {}

  void start() {
    waitingSince_ = Clock::now();
    deadline_ = *waitingSince_ + limits_.requestTimeout;
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      readRequest();
    } else {
      lowest().expires_at(deadline_);
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->lowest().close();
                                self->readRequest(/*fresh=*/false);
                              });
    }
  }

  void close() override {
    deadlineTimer_.cancel();
    lowest().close();
  }
  std::optional<Clock::time_point> waitingSince() const override { return waitingSince_; }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Waits for the next request: its headers, then its body, all before one deadline.
  void readRequest(bool fresh = true) {
    if (fresh) {
      waitingSince_ = Clock::now();
      deadline_ = *waitingSince_ + limits_.requestTimeout;
    }
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.maxHeaderBytes));
    parser_->body_limit(limits_.maxBodyBytes);
    // The deadline cancels the read, which leaves the socket open for the 408 (the stream's own
    // timeout would close it).
    lowest().expires_never();
    timedOut_ = false;
    deadlineTimer_.expires_at(deadline_);
    deadlineTimer_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->timedOut_ = true;
      beast::error_code ignored;
      self->lowest().socket().cancel(ignored);
    });
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->onHeader(ec); });
  }

  void onHeader(beast::error_code ec) {
    if (ec) return failRead(ec);
    const auto& req = parser_->get();
    if (req.target().size() > limits_.maxUriBytes) return refuse(414, "request URI too long");
    if (static_cast<size_t>(std::distance(req.begin(), req.end())) > limits_.maxHeaders) {
      return refuse(413, "request too large: too many headers");
    }
    if (parser_->is_done()) return dispatch();
    auto readBody = [self = this->shared_from_this()] {
      bhttp::async_read(
          self->stream_, self->buffer_, *self->parser_,
          [self](beast::error_code e, size_t) { e ? self->failRead(e) : self->dispatch(); });
    };
    if (!beast::iequals(req[bhttp::field::expect], "100-continue")) return readBody();
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue),
                     [self = this->shared_from_this(), readBody](beast::error_code e, size_t) {
                       if (e) return self->lowest().close();
                       readBody();
                     });
  }

  void failRead(beast::error_code ec) {
    if (timedOut_) {
      // An idle connection (nothing of a next request) just closes; a request cut short is
      // answered.
      if (buffer_.size() == 0 && !parser_->got_some()) return lowest().close();
      return refuse(408, "the request did not arrive in time");
    }
    if (ec == bhttp::error::header_limit) {
      // A request line that alone passes the URI limit is a long URI, else too many header bytes.
      std::string_view seen(static_cast<const char*>(buffer_.data().data()), buffer_.size());
      size_t lineEnd = seen.find("\r\n");
      bool longUri = parser_->is_header_done()
                         ? false
                         : (lineEnd == std::string_view::npos || lineEnd > limits_.maxUriBytes);
      return longUri ? refuse(414, "request URI too long")
                     : refuse(413, "request too large: headers");
    }
    if (ec == bhttp::error::body_limit) return refuse(413, "request too large");
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == net::error::eof || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::ssl::error::stream_truncated) {
      return lowest().close();
    }
    refuse(400, "bad request");  // malformed; Content-Length with Transfer-Encoding among them
  }

  // The request as far as it was read, for the audit log.
  HttpRequest partialRequest() {
    HttpRequest r;
    r.remoteAddr = remote_;
    if (parser_ && parser_->is_header_done()) {
      const auto& req = parser_->get();
      r.method = std::string(req.method_string());
      r.target = std::string(req.target());
      splitTarget(r);
    }
    return r;
  }

  // Answers a request the transport will not pass on, and closes: what is left of it is never read
  // as a request.
  void refuse(int status, std::string_view message) {
    waitingSince_.reset();
    deadlineTimer_.cancel();
    HttpResponse res;
    jsonError(res, status, message);
    res.close = true;
    if (listener_.answered) listener_.answered(partialRequest(), status);
    write(std::move(res), /*head=*/false, /*keepAlive=*/false);
  }

  void dispatch() {
    waitingSince_.reset();
    deadlineTimer_.cancel();
    auto& req = parser_->get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    splitTarget(r);
    for (const auto& field : req)
      r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    r.body = std::move(req.body());
    r.remoteAddr = remote_;
    const bool head = req.method() == bhttp::verb::head;
    const bool keepAlive = req.keep_alive();
    listener_.dispatch(std::move(r), [self = this->shared_from_this(), head, keepAlive,
                                      request = partialRequest()](HttpResponse res) {
      // Called on a worker thread.
      if (self->listener_.answered) {
        net::post(self->lowest().get_executor(), [self, request, status = res.status] {
          self->listener_.answered(request, status);
        });
      }
      if (res.stream && !head) return self->writeStreamed(std::move(res), keepAlive);
      net::post(self->lowest().get_executor(),
                [self, res = std::move(res), head, keepAlive]() mutable {
                  self->write(std::move(res), head, keepAlive);
                });
    });
  }

  // The status line and headers of an answer: its length, or chunked when streamed.
  static std::string headOf(const HttpResponse& res, bool keepAlive) {
    auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(res.status));
    std::string head = fmt::format("HTTP/1.1 {} {}\r\n", res.status,
                                   std::string_view(reason.data(), reason.size()));
    for (const auto& [name, value] : res.headers) head += name + ": " + value + "\r\n";
    if (!res.contentType.empty()) head += "Content-Type: " + res.contentType + "\r\n";
    head += res.stream ? std::string("Transfer-Encoding: chunked\r\n")
                       : fmt::format("Content-Length: {}\r\n", res.body.size());
    if (!keepAlive) head += "Connection: close\r\n";
    return head + "\r\n";
  }

  // On the I/O thread: an answer in full (the head alone for HEAD).
  void write(HttpResponse res, bool head, bool keepAlive) {
    const bool again = keepAlive && !res.close;
    auto out = std::make_shared<std::string>(headOf(res, again));
    if (!head && !res.stream) *out += res.body;
    lowest().expires_after(limits_.writeTimeout);
    net::async_write(stream_, net::buffer(*out),
                     [self = this->shared_from_this(), out, again](beast::error_code ec, size_t) {
                       if (ec) return self->lowest().close();
                       again ? self->readRequest() : self->closeGracefully();
                     });
  }

  // Writes `data` from a worker thread (the I/O thread does the writing); false when it failed.
  bool writeFromWorker(const std::string& data) {
    std::promise<bool> done;
    auto written = done.get_future();
    net::post(lowest().get_executor(), [this, &data, &done] {
      lowest().expires_after(limits_.writeTimeout);
      net::async_write(stream_, net::buffer(data),
                       [&done](beast::error_code ec, size_t) { done.set_value(!ec); });
    });
    return written.get();
  }

  // On a worker thread: the head, the body in chunks, the last chunk.
  void writeStreamed(HttpResponse res, bool keepAlive) {
    bool ok = writeFromWorker(headOf(res, keepAlive));
    std::string chunk;
    auto flush = [&] {
      if (!ok || chunk.empty()) return ok;
      ok = writeFromWorker(fmt::format("{:x}\r\n", chunk.size()) + chunk + "\r\n");
      chunk.clear();
      return ok;
    };
    const bool complete = ok && res.stream([&](std::string_view piece) {
      chunk.append(piece);
      return chunk.size() < kStreamChunk || flush();
    }) && flush() && writeFromWorker("0\r\n\r\n");
    net::post(lowest().get_executor(),
              [self = this->shared_from_this(), again = complete && keepAlive] {
                again ? self->readRequest() : self->lowest().close();
              });
  }

  // Closes after the last answer: stop sending, then read (and drop) what the client still sends
  // for a moment, so the answer is not lost to a reset.
  void closeGracefully() {
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    drained_ = 0;
    lowest().expires_after(kDrainTime);
    drain();
  }

  void drain() {
    lowest().async_read_some(net::buffer(drainBuffer_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                               self->drained_ += n;
                               if (ec || self->drained_ >= kDrainBytes)
                                 return self->lowest().close();
                               self->drain();
                             });
  }

  Stream stream_;
  ListenerState& listener_;
  const HttpLimits& limits_;
  const std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Clock::time_point deadline_;
  net::steady_timer deadlineTimer_;
  bool timedOut_ = false;  // the deadline passed before the request was read in full
  std::optional<Clock::time_point> waitingSince_;
  std::array<char, 4096> drainBuffer_{};
  size_t drained_ = 0;
};

}  // namespace

struct HttpTransport::Impl {
  struct Listener {
    ListenerState state;
    std::optional<tcp::acceptor> acceptor;
    std::list<std::weak_ptr<Connection>> connections;  // I/O thread only
  };

  explicit Impl(HttpLimits l) : limits(l) {}

  // A connection within the limit: the one that has waited longest for its request makes room;
  // none does while every connection is being served.
  bool admit(Listener& l) {
    l.connections.remove_if([](const auto& c) { return c.expired(); });
    if (l.connections.size() < limits.maxConnections) return true;
    std::shared_ptr<Connection> oldest;
    for (const auto& weak : l.connections) {
      auto c = weak.lock();
      if (c && c->waitingSince() && (!oldest || *c->waitingSince() < *oldest->waitingSince()))
        oldest = c;
    }
    if (!oldest) return false;
    oldest->close();
    return true;
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
      if (admit(l)) {
        beast::error_code ignored;
        std::string remote = socket.remote_endpoint(ignored).address().to_string(ignored);
        beast::tcp_stream stream(std::move(socket));
        std::shared_ptr<Connection> session;
        if (l.state.tls) {
          auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
              beast::ssl_stream<beast::tcp_stream>(std::move(stream), *l.state.tls), l.state,
              remote);
          s->start();
          session = s;
        } else {
          auto s = std::make_shared<Session<beast::tcp_stream>>(std::move(stream), l.state, remote);
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
                                  const std::string& tlsKey, Dispatch dispatch, Answered answered) {
  auto& l = impl_->listeners.emplace_back();
  l.state.limits = impl_->limits;
  l.state.dispatch = std::move(dispatch);
  l.state.answered = std::move(answered);
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
    return Status::fatal(fmt::format("cannot listen on {}:{}", host, port));
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
