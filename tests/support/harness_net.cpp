#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

// HTTP against a bridge, raw sockets on loopback, and the proxies that stand between.

namespace outbox::test {

HttpReply httpRequest(int port, const std::string& method, const std::string& path, const std::string& body,
                      const std::map<std::string, std::string>& headers) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(30));
  httplib::Headers extra;
  for (const auto& [k, v] : headers) extra.emplace(k, v);
  client.set_default_headers(extra);
  httplib::Result res = method == "GET"    ? client.Get(path)
                        : method == "POST" ? client.Post(path, body, "application/json")
                        : method == "PUT"  ? client.Put(path, body, "application/json")
                                           : client.Delete(path);
  HttpReply reply;
  if (!res) return reply;
  reply.status = res->status;
  reply.body = res->body;
  for (const auto& [k, v] : res->headers) reply.headers[k] = v;
  return reply;
}

double metricSample(const std::string& page, const std::string& nameAndLabels) {
  auto at = page.find("\n" + nameAndLabels + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + nameAndLabels.size() + 2));
}

double sourceMetric(int port, const std::string& name, const std::string& source) {
  return metricSample(httpRequest(port, "GET", "/metrics").body, fmt::format("{}{{source=\"{}\"}}", name, source));
}

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  if (port == 0) throw std::runtime_error("no free loopback port");
  return port;
}

int connectTo(int port, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string readAll(int fd, std::chrono::milliseconds quiet) {
  timeval tv{static_cast<time_t>(quiet.count() / 1000), static_cast<suseconds_t>((quiet.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::vector<int> statuses(const std::string& bytes) {
  std::vector<int> out;
  // Answer after answer, each skipped by its Content-Length; one without (chunked, or ended by the
  // close) is the last.
  for (size_t at = 0; bytes.compare(at, 9, "HTTP/1.1 ") == 0;) {
    out.push_back(std::atoi(bytes.c_str() + at + 9));
    size_t headEnd = bytes.find("\r\n\r\n", at);
    size_t length = bytes.find("\r\nContent-Length: ", at);
    if (headEnd == std::string::npos || length == std::string::npos || length > headEnd) break;
    at = headEnd + 4 + std::strtoul(bytes.c_str() + length + 18, nullptr, 10);
  }
  return out;
}

HttpReply rawHttp(int port, const std::string& request, std::chrono::milliseconds timeout) {
  HttpReply reply;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return reply;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
      response.append(buf, static_cast<size_t>(n));
      // One response is enough: stop at the end of its body.
      auto headerEnd = response.find("\r\n\r\n");
      auto lengthAt = response.find("Content-Length: ");
      if (headerEnd != std::string::npos && lengthAt != std::string::npos && lengthAt < headerEnd &&
          response.size() >= headerEnd + 4 + std::stoul(response.substr(lengthAt + 16))) {
        break;
      }
    }
  }
  ::close(fd);
  if (response.rfind("HTTP/1.1 ", 0) != 0) return reply;
  reply.status = std::stoi(response.substr(9, 3));
  auto headerEnd = response.find("\r\n\r\n");
  if (headerEnd != std::string::npos) reply.body = response.substr(headerEnd + 4);
  return reply;
}

struct ForwardingProxy::Impl {
  httplib::Server server;
  std::thread thread;
};

ForwardingProxy::ForwardingProxy(int targetPort, Rewrite rewrite) : impl_(std::make_unique<Impl>()) {
  auto served = std::make_shared<std::atomic<int>>(0);
  impl_->server.Get(".*", [targetPort, rewrite, served](const httplib::Request& req, httplib::Response& res) {
    auto real = httpRequest(targetPort, "GET", req.target);
    res.status = real.status;
    res.set_content(rewrite(served->fetch_add(1), req.target, real.body), "application/json");
  });
  port_ = impl_->server.bind_to_any_port("127.0.0.1");
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

ForwardingProxy::~ForwardingProxy() {
  impl_->server.stop();
  impl_->thread.join();
}

struct TcpProxy::Impl {
  int listener = -1;
  std::atomic<bool> stopping{false};
  std::atomic<bool> cut{false};
  std::atomic<int> target{0};
  std::atomic<uint64_t> generation{0};  // retarget() ends the connections of older generations
  std::thread acceptor;
  std::mutex mu;
  std::vector<std::thread> pipes;  // GUARDED_BY(mu)
  std::string lastWords;           // GUARDED_BY(mu): sent to a client a new generation ends

  static int connectTo(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Copies bytes both ways until either end closes, the proxy stops or is retargeted; while cut,
  // reads nothing (the kernel buffers fill and the senders stall, as behind a dead link).
  void pipe(int client, uint64_t born) {
    int server = connectTo(target.load());
    if (server < 0) {
      ::close(client);
      return;
    }
    char buf[16384];
    while (!stopping && generation == born) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (cut) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (::poll(fds, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        int to = i == 0 ? server : client;
        for (ssize_t sent = 0; n > 0 && sent < n;) {
          ssize_t w = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) break;
          sent += w;
        }
        closed = n <= 0;
      }
      if (closed) break;
    }
    if (!stopping && generation != born) {
      std::string words;
      {
        std::lock_guard lock(mu);
        words = lastWords;
      }
      if (!words.empty()) ::send(client, words.data(), words.size(), MSG_NOSIGNAL);
    }
    ::close(client);
    ::close(server);
  }
};

TcpProxy::TcpProxy(int targetPort) : impl_(std::make_unique<Impl>()) {
  impl_->target = targetPort;
  impl_->listener = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(impl_->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(impl_->listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(impl_->listener, 64) != 0 ||
      ::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("tcp proxy: cannot listen");
  }
  port_ = ntohs(addr.sin_port);
  impl_->acceptor = std::thread([impl = impl_.get()] {
    while (!impl->stopping) {
      pollfd fd{impl->listener, POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) continue;
      int client = ::accept(impl->listener, nullptr, nullptr);
      if (client < 0) continue;
      std::lock_guard lock(impl->mu);
      impl->pipes.emplace_back([impl, client, born = impl->generation.load()] { impl->pipe(client, born); });
    }
  });
}

TcpProxy::~TcpProxy() {
  impl_->stopping = true;
  impl_->acceptor.join();
  std::lock_guard lock(impl_->mu);
  for (auto& t : impl_->pipes) t.join();
  ::close(impl_->listener);
}

void TcpProxy::cut() { impl_->cut = true; }
void TcpProxy::heal() { impl_->cut = false; }

void TcpProxy::retarget(int targetPort) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->lastWords.clear();
  }
  impl_->target = targetPort;
  ++impl_->generation;
}

void TcpProxy::closeClients(const std::string& lastWords) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->lastWords = lastWords;
  }
  ++impl_->generation;
}

}  // namespace outbox::test
