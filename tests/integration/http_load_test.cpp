// Issue 38: the HTTP listeners under hostile clients, second round — a flood of unauthenticated
// connections that starved the health probe, HEAD on a snapshot that stalled the one I/O thread
// both listeners share, a log written as fast as a client sent, and framing a proxy would read
// differently (request smuggling). Two bridges serve every check: one with a 1,000,000-row
// snapshot and its health routes on a listener apart, one with everything on its main listener.
// Every client is bounded in count and time and talks to 127.0.0.1 only.
#define BOOST_TEST_MODULE http_load
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "http_load.h"

// The flood and the million-row snapshot are here; logging and framing (request smuggling) in
// http_load_framing_test.cpp; LoadBridge and roundTrip in http_load.h.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const bool kNoted = (registerSecret(kToken), true);

}  // namespace

namespace outbox::test {

// The bridges, made when a test first asks and shared by the rest (a million rows take seconds).
std::unique_ptr<LoadBridge> bigBridge, smallBridge;
LoadBridge& withBigSnapshot() {
  if (!bigBridge) bigBridge = std::make_unique<LoadBridge>("httpload_big", 1'000'000, true);
  return *bigBridge;
}
LoadBridge& allOnOneListener() {
  if (!smallBridge) smallBridge = std::make_unique<LoadBridge>("httpload_small", 3, false);
  return *smallBridge;
}
struct StopBridges {
  ~StopBridges() {
    bigBridge.reset();
    smallBridge.reset();
  }
};
BOOST_TEST_GLOBAL_FIXTURE(StopBridges);

}  // namespace outbox::test

namespace {

// /healthz asked on a fresh connection every `every` until stopped: how many were answered 200 and
// how long each took.
class HealthProbe {
 public:
  HealthProbe(int port, std::chrono::milliseconds every)
      : thread_([this, port, every] {
          while (!done_) {
            auto begin = Clock::now();
            auto reply = rawHttp(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 2000ms);
            double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
            {
              std::lock_guard lock(mu_);
              ++asked_;
              if (reply.status == 200) took_.push_back(ms);
            }
            std::this_thread::sleep_until(begin + every);
          }
        }) {}
  ~HealthProbe() { finish(); }
  void finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  struct Figures {
    size_t asked = 0;
    size_t answered = 0;
    double p50 = 0, p99 = 0, max = 0;
    size_t over100 = 0;  // answered after more than 100 ms
    std::string text() const {
      return fmt::format("{} of {} answered ({:.1f} %), p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms, {} over 100 ms",
                         answered, asked, asked ? 100.0 * answered / asked : 0.0, p50, p99, max, over100);
    }
  };
  // Stops probing; latencies are of the answered probes (a missed one counts as unanswered).
  Figures figures() {
    finish();
    Figures f;
    f.asked = asked_;
    f.answered = took_.size();
    std::sort(took_.begin(), took_.end());
    auto at = [&](double q) { return took_.empty() ? 0.0 : took_[std::min(took_.size() - 1, size_t(q * took_.size()))]; };
    f.p50 = at(0.50);
    f.p99 = at(0.99);
    f.max = took_.empty() ? 0.0 : took_.back();
    f.over100 = static_cast<size_t>(std::count_if(took_.begin(), took_.end(), [](double ms) { return ms > 100.0; }));
    return f;
  }

 private:
  std::mutex mu_;
  size_t asked_ = 0;         // GUARDED_BY(mu_)
  std::vector<double> took_;  // GUARDED_BY(mu_)
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// `clients` unauthenticated clients, each connecting, sending one of `requests` (in turn), reading
// the answer, holding the socket 1.5 s after it and connecting again, for `length`.
class Flood {
 public:
  Flood(int port, int clients, std::vector<std::string> requests, std::chrono::milliseconds length)
      : requests_(std::move(requests)) {
    const auto end = Clock::now() + length;
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, port, end, c] {
        // Yield to the bridge and the probes (nice is per thread on Linux): the probes measure the
        // bridge, not how 800 threads of this process are scheduled on a busy machine.
        ::setpriority(PRIO_PROCESS, 0, 10);
        for (size_t n = c; Clock::now() < end; ++n) {
          int fd = connectTo(port, 1000ms);
          if (fd < 0) continue;
          ++connections_;
          if (sendAll(fd, requests_[n % requests_.size()])) {
            char buf[512];
            if (::recv(fd, buf, sizeof buf, 0) > 0) ++answered_;
          }
          // The attacker's pace, not a wait for a condition: hold the socket, whatever the server does.
          std::this_thread::sleep_until(std::min(end, Clock::now() + 1500ms));
          ::close(fd);
        }
      });
    }
  }
  ~Flood() { join(); }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::string text() const { return fmt::format("{} flooding connections, {} answered", connections_.load(), answered_.load()); }

 private:
  std::vector<std::string> requests_;
  std::atomic<int> connections_{0};
  std::atomic<int> answered_{0};
  std::vector<std::thread> threads_;
};

}  // namespace

// 400 clients that send `BAD` (or a valid /healthz with Connection: close), hold the socket 1.5 s
// after the answer and reconnect: each answered connection sat in its closing drain, admission
// only evicted connections waiting for a request, and 85 % of the probes got no answer at all.
BOOST_AUTO_TEST_CASE(healthz_answers_on_both_listeners_under_a_flood_of_unauthenticated_connections) {
  LoadBridge& apart = withBigSnapshot();
  LoadBridge& together = allOnOneListener();
  const std::vector<std::string> hostile{"BAD\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"};
  HealthProbe metricsProbe(apart.metricsPort, 50ms);
  HealthProbe mainProbe(together.port, 50ms);
  {
    Flood metricsFlood(apart.metricsPort, 400, hostile, 10s);
    Flood mainFlood(together.port, 400, hostile, 10s);
    metricsFlood.join();
    mainFlood.join();
    BOOST_TEST_MESSAGE("metrics_listen: " << metricsFlood.text() << "; listen: " << mainFlood.text());
  }
  for (auto [name, probe] : {std::pair{"metrics_listen", &metricsProbe}, std::pair{"listen", &mainProbe}}) {
    auto f = probe->figures();
    BOOST_TEST_MESSAGE("/healthz on " << name << " under the flood: " << f.text());
    BOOST_TEST(f.asked >= 100u);
    BOOST_TEST(f.answered >= f.asked * 95 / 100, name << ": " << f.text());
    BOOST_TEST(f.p99 < 100.0, name << ": " << f.text());
  }
  BOOST_TEST(apart.process->running());
  BOOST_TEST(together.process->running());
}

// A HEAD on a snapshot opened one and dropped it on the I/O thread, whose mysql_free_result read
// every row there: four HEAD loops on a million rows held /healthz on the other listener for up
// to a second. A GET cut short by its client must not stall anything either, and its query must
// leave the database.
BOOST_AUTO_TEST_CASE(head_on_a_million_row_snapshot_and_gets_cut_short_stall_no_listener) {
  LoadBridge& bridge = withBigSnapshot();
  const std::string head = "HEAD " + bridge.snapshotPath() + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  HealthProbe probe(bridge.metricsPort, 20ms);
  std::atomic<int> heads{0}, headOk{0}, cut{0};
  const auto began = Clock::now();
  {
    std::vector<std::thread> loops;
    const auto end = Clock::now() + 3s;
    for (int c = 0; c < 4; ++c) {
      loops.emplace_back([&] {
        for (int i = 0; i < 1000 && Clock::now() < end; ++i) {
          std::string answer = roundTrip(bridge.port, head, 3000ms);
          ++heads;
          if (statuses(answer) == std::vector<int>{200} && answer.find("\r\n\r\n") + 4 == answer.size()) ++headOk;
        }
      });
    }
    // Four GETs read 64 KB of the document and go away.
    loops.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        int fd = connectTo(bridge.port);
        if (fd < 0) continue;
        sendAll(fd, "GET " + bridge.snapshotPath() + " HTTP/1.1\r\nHost: x\r\n\r\n");
        size_t got = 0;
        char buf[16384];
        for (ssize_t n; got < 64 * 1024 && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got += size_t(n);
        ::close(fd);
        if (got >= 64 * 1024) ++cut;
      }
    });
    for (auto& t : loops) t.join();
  }
  // The HEADs end at 3 s or at 4,000, which a quiet machine answers in well under a second.
  const auto ranMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
  auto f = probe.figures();
  BOOST_TEST_MESSAGE(fmt::format("{} HEADs ({} answered 200 with no body), {} GETs cut short; /healthz on "
                                 "metrics_listen meanwhile: {}",
                                 heads.load(), headOk.load(), cut.load(), f.text()));
  BOOST_TEST(heads.load() >= 8);
  // The probe asked throughout (every 20 ms; one a 100 ms at least): a fixed count failed when the
  // HEADs were done in 0.4 s.
  BOOST_TEST(f.asked >= static_cast<size_t>(ranMs / 100), f.asked << " probes in " << ranMs << " ms");
  BOOST_TEST(headOk.load() == heads.load());
  BOOST_TEST(cut.load() == 4);
  BOOST_TEST(f.answered == f.asked, f.text());
  // The stall this guards against held /healthz for up to a second, probe after probe. One probe
  // in a run may wait on the two shared cores (118 ms and 103 ms once, beside four HEAD loops and
  // MariaDB streaming a million rows); the rest are answered at once.
  BOOST_TEST(f.over100 <= 1u, f.text());
  BOOST_TEST(f.max < 400.0, f.text());
  // The snapshot queries of the GETs cut short end: nothing of this database's is left running.
  const std::string running = fmt::format(
      "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND INFO LIKE 'SELECT id, name FROM accounts%'",
      bridge.database.name());
  auto cutAt = Clock::now();
  BOOST_TEST(waitUntil([&] { return bridge.database.scalar(running) == 0; }, 10s), "a snapshot query is still running");
  BOOST_TEST_MESSAGE(fmt::format("the cut snapshots' queries were gone from the server {} ms after the test looked",
                                 std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cutAt).count()));
}
