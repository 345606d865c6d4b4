#pragma once

// One HTTP connection on Boost.Beast: reading requests within HttpLimits and writing answers.
// Included by transport.cpp only (with it and listener.h, the only code that includes Beast).

#include <fmt/format.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "http/json_response.h"
#include "http/listener.h"

namespace outbox::http_detail {

template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, ListenerState& listener, std::string remote, bool reserved)
      : stream_(std::move(stream)),
        listener_(listener),
        limits_(listener.limits),
        remote_(std::move(remote)),
        reserved_(reserved),
        buffer_(limits_.maxHeaderBytes + 4096),
        deadlineTimer_(lowest().get_executor()) {}

  void start() {
    enter(Phase::kWaiting);
    deadline_ = phaseSince_ + limits_.requestTimeout;
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
    enter(Phase::kClosing);  // no longer counts, nor is evicted again before its handlers end
    deadlineTimer_.cancel();
    lowest().close();
  }
  Phase phase() const override { return phase_; }
  Clock::time_point phaseSince() const override { return phaseSince_; }
  bool reserved() const override { return reserved_; }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  void enter(Phase phase) {
    phase_ = phase;
    phaseSince_ = Clock::now();
  }

  // Waits for the next request: its headers, then its body, all before one deadline.
  void readRequest(bool fresh = true) {
    if (fresh) {
      enter(Phase::kWaiting);
      deadline_ = phaseSince_ + limits_.requestTimeout;
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
    // RFC 9112 6.1, 6.3: a transfer coding that does not end in chunked cannot be framed, and
    // HTTP/1.0 has none; 3.2: exactly one Host in HTTP/1.1, at most one in HTTP/1.0.
    if (req.count(bhttp::field::transfer_encoding) > 0 && (req.version() < 11 || !parser_->chunked())) {
      return refuse(400, "bad request: a Transfer-Encoding must end in chunked, and HTTP/1.0 has none");
    }
    const size_t hosts = req.count(bhttp::field::host);
    if (hosts > 1 || (hosts == 0 && req.version() >= 11)) {
      return refuse(400, "bad request: one Host header is required (none in HTTP/1.0), at most one");
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
      // Beast consumes the request line before the headers: once it has (the target is known),
      // the headers are what is too large. Else the request line alone passed the limit.
      const auto target = parser_->get().target();
      return (target.empty() || target.size() > limits_.maxUriBytes)
                 ? refuse(414, "request URI too long")
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

  // The request as far as it was read, for the audit log: its line once read, its headers once
  // all were.
  HttpRequest partialRequest() {
    HttpRequest r;
    r.remoteAddr = remote_;
    if (!parser_) return r;
    const auto& req = parser_->get();
    if (req.target().empty()) return r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    splitTarget(r);
    if (parser_->is_header_done()) {
      for (const auto& field : req)
        r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    return r;
  }

  // Answers a request the transport will not pass on, and closes: what is left of it is never read
  // as a request.
  void refuse(int status, std::string_view message) {
    enter(Phase::kServing);
    deadlineTimer_.cancel();
    HttpResponse res;
    jsonError(res, status, message);
    if (status == 503) res.setHeader("Retry-After", "1");
    res.close = true;
    if (listener_.answered) listener_.answered(partialRequest(), status);
    write(std::move(res), /*head=*/false, /*keepAlive=*/false, /*http10=*/false);
  }

  void dispatch() {
    enter(Phase::kServing);
    deadlineTimer_.cancel();
    auto& req = parser_->get();
    HttpRequest r = partialRequest();
    r.body = std::move(req.body());
    if (reserved_ && !(listener_.reserved && listener_.reserved(r.path))) {
      return refuse(503, "the server is at its connection limit; retry shortly");
    }
    const bool head = req.method() == bhttp::verb::head;
    const bool http10 = req.version() < 11;
    // A reserved connection serves one request; an HTTP/1.0 one stays open only when asked to.
    const bool keepAlive = req.keep_alive() && !reserved_;
    HttpRequest request = partialRequest();
    listener_.dispatch(std::move(r), [self = this->shared_from_this(), head, keepAlive, http10,
                                      request = std::move(request)](HttpResponse res) {
      // On the thread that answers: a worker, or the I/O thread for an answer without a stream.
      if (self->listener_.answered) self->listener_.answered(request, res.status);
      if (res.stream && !head) return self->writeStreamed(std::move(res), keepAlive, http10);
      // What a stream owns (a snapshot's database read) is released here, never on the I/O thread.
      const bool streamed = static_cast<bool>(res.stream);
      res.stream = nullptr;
      net::post(self->lowest().get_executor(),
                [self, res = std::move(res), head, keepAlive, http10, streamed]() mutable {
                  self->write(std::move(res), head, keepAlive, http10, streamed);
                });
    });
  }

  // The status line and headers of an answer: its length; for a body of unknown length
  // (`streamed`), chunked, or to HTTP/1.0 nothing (the close ends it).
  static std::string headOf(const HttpResponse& res, bool keepAlive, bool http10, bool streamed) {
    auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(res.status));
    std::string head = fmt::format("HTTP/1.1 {} {}\r\n", res.status,
                                   std::string_view(reason.data(), reason.size()));
    for (const auto& [name, value] : res.headers) head += name + ": " + value + "\r\n";
    if (!res.contentType.empty()) head += "Content-Type: " + res.contentType + "\r\n";
    if (!streamed) {
      head += fmt::format("Content-Length: {}\r\n", res.body.size());
    } else if (!http10) {
      head += "Transfer-Encoding: chunked\r\n";
    }
    if (!keepAlive) {
      head += "Connection: close\r\n";
    } else if (http10) {
      head += "Connection: keep-alive\r\n";
    }
    return head + "\r\n";
  }

  // On the I/O thread: an answer in full (the head alone for HEAD).
  void write(HttpResponse res, bool head, bool keepAlive, bool http10, bool streamed = false) {
    const bool again = keepAlive && !res.close && !(streamed && http10);
    auto out = std::make_shared<std::string>(headOf(res, again, http10, streamed));
    if (!head && !streamed) *out += res.body;
    lowest().expires_after(limits_.writeTimeout);
    net::async_write(stream_, net::buffer(*out),
                     [self = this->shared_from_this(), out, again](beast::error_code ec, size_t) {
                       if (ec) return self->lowest().close();
                       again ? self->readRequest() : self->closeGracefully();
                     });
  }

  // Starts writing `data` from a worker thread (the I/O thread does the writing). The future says
  // whether it was written; the worker must wait for it before `data` or the session may go.
  std::future<bool> startWriteFromWorker(const std::string& data) {
    auto done = std::make_shared<std::promise<bool>>();
    auto written = done->get_future();
    net::post(lowest().get_executor(), [this, &data, done] {
      lowest().expires_after(limits_.writeTimeout);
      net::async_write(stream_, net::buffer(data), [done](beast::error_code ec, size_t) { done->set_value(!ec); });
    });
    return written;
  }

  // On a worker thread: the head, the body in chunks (to HTTP/1.0 as it is, then the close), the
  // last chunk. The worker fills the next chunk while the I/O thread writes the one before (one
  // write in flight at a time). The stream is released here when the answer is done or cut short.
  void writeStreamed(HttpResponse res, bool keepAlive, bool http10) {
    keepAlive = keepAlive && !http10;
    constexpr size_t kStreamChunk = 64 * 1024;  // pieces are gathered up to this before a write
    std::string chunk, sending = headOf(res, keepAlive, http10, /*streamed=*/true);
    std::future<bool> sent = startWriteFromWorker(sending);
    bool ok = true;
    // Waits for the write in flight, then starts writing `chunk` (framed) in its place.
    auto send = [&](bool last) {
      ok = ok && sent.get();
      if (!ok) return false;
      sending.clear();
      if (!http10 && !chunk.empty()) fmt::format_to(std::back_inserter(sending), "{:x}\r\n", chunk.size());
      sending += chunk;
      if (!http10 && !chunk.empty()) sending += "\r\n";
      if (!http10 && last) sending += "0\r\n\r\n";
      chunk.clear();
      sent = startWriteFromWorker(sending);
      return true;
    };
    const bool streamed = res.stream([&](std::string_view piece) {
      chunk.append(piece);
      return chunk.size() < kStreamChunk || send(/*last=*/false);
    });
    const bool complete = streamed && send(/*last=*/true) && sent.get();
    if (sent.valid()) sent.wait();  // the write in flight, when the answer was cut short
    res.stream = nullptr;
    net::post(lowest().get_executor(), [self = this->shared_from_this(), complete, keepAlive] {
      if (!complete) return self->lowest().close();
      keepAlive ? self->readRequest() : self->closeGracefully();
    });
  }

  // Closes after the last answer: stop sending, then read (and drop) what the client still sends
  // for a moment, so the answer is not lost to a reset.
  void closeGracefully() {
    enter(Phase::kClosing);
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

  // Bytes a closing connection still reads (and drops) after its last answer, for at most a
  // second, so that closing on unread bytes does not reset the connection before the client reads
  // the answer.
  static constexpr size_t kDrainBytes = 64 * 1024;
  static constexpr std::chrono::seconds kDrainTime{1};

  Stream stream_;
  ListenerState& listener_;
  const HttpLimits& limits_;
  const std::string remote_;
  const bool reserved_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Clock::time_point deadline_;
  net::steady_timer deadlineTimer_;
  bool timedOut_ = false;  // the deadline passed before the request was read in full
  Phase phase_ = Phase::kWaiting;
  Clock::time_point phaseSince_;
  std::array<char, 4096> drainBuffer_{};
  size_t drained_ = 0;
};

}  // namespace outbox::http_detail
