#define BOOST_TEST_MODULE fault_settle_keys
#include <boost/test/unit_test.hpp>

// settle_max_keys bounds the settle thread's memory (issue 36; README, "The settled stream";
// docs/design.md, "The Settler"): many more distinct keys changed within one window than the
// bound, and the bridge's memory stays at what the bound allows, the oldest keys settling early,
// counted. Heavy (a million rows through both streams): a test of its own.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "settle_support.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr int kKeys = 1'000'000;   // distinct keys, each changed once, all within one window
constexpr int kBound = 100'000;    // settle_max_keys (its default)
constexpr int kBodyPad = 170;      // bodies of about 200 bytes, as docs/design.md measured with
constexpr double kBytesPerKey = 816;  // a pending key (docs/design.md, "The Settler", measured)

// A line of /proc/PID/status ("VmRSS", "VmHWM") in bytes, or -1.
double procBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024.0;
  }
  return -1;
}

}  // namespace

// A million distinct keys changed within one window (settle = 10 min) with settle_max_keys =
// 100,000: the bridge's peak RSS stays within its RSS at rest plus twice what 100,000 pending keys
// take (816 bytes a key, docs/design.md: 82 MB; twice for the heap's slack, the feed's bound of
// rows waiting and the settled publishes in flight). Without the bound the pending keys alone
// would take 816 MB, five times that. The 900,000 oldest keys settle early, each counted in
// outbox_settled_early_total, and no more than the bound are ever pending.
BOOST_AUTO_TEST_CASE(a_million_keys_in_one_window_keep_the_memory_bounded_and_the_early_settling_counted) {
  const auto begin = std::chrono::steady_clock::now();
  TestDatabase database("settlem");
  SourceSpec source{uniqueName("settlem", database), &database,
                    {{"settle", "\"10m\""}, {"settle_max", "\"10m\""}, {"settle_max_keys", std::to_string(kBound)}}};
  const std::string config = writeConfig({source});
  migrate(config);
  StreamReader reader;
  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.httpPort();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_settle_pending_keys", source.name) == 0; }, 30s),
                        bridge.log());
  const double atRest = procBytes(bridge.pid(), "VmRSS");
  BOOST_REQUIRE(atRest > 0);
  auto producer = database.connect();
  double maxPending = 0;
  for (int first = 0; first < kKeys; first += 100'000) {
    insertRows(*producer, source.outboxTable(), std::min(100'000, kKeys - first), first, "item", kBodyPad);
    maxPending = std::max(maxPending, sourceMetric(port, "outbox_settle_pending_keys", source.name));
  }
  const uint64_t early = kKeys - kBound;
  const double bound = atRest + 2 * kBound * kBytesPerKey;
  // Until the early keys have settled, or the memory is past the bound (no need to wait then).
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    std::this_thread::sleep_for(200ms);  // a few reads a second while the bridge works
    maxPending = std::max(maxPending, sourceMetric(port, "outbox_settle_pending_keys", source.name));
    return procBytes(bridge.pid(), "VmHWM") > bound ||
           (database.state(source.name).publishedThrough == static_cast<uint64_t>(kKeys) &&
            reader.state(settledStreamOf(source)).messages >= early);
  }, 420s), bridge.log());
  const double peak = procBytes(bridge.pid(), "VmHWM");
  BOOST_TEST_MESSAGE(fmt::format("{} keys, settle_max_keys {}: bridge RSS at rest {:.1f} MiB, peak {:.1f} MiB (bound "
                                 "{:.1f} MiB); {:.0f} s",
                                 kKeys, kBound, atRest / (1 << 20), peak / (1 << 20), bound / (1 << 20),
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count()));
  BOOST_TEST(peak <= bound);
  // The newest keys wait for their window; every older one settled early, once, and was counted.
  BOOST_TEST(reader.state(settledStreamOf(source)).messages == early);
  BOOST_TEST(sourceMetric(port, "outbox_settled_early_total", source.name) == static_cast<double>(early));
  BOOST_TEST(sourceMetric(port, "outbox_settle_pending_keys", source.name) == static_cast<double>(kBound));
  BOOST_TEST(maxPending <= static_cast<double>(kBound));
  BOOST_TEST(bridge.stop() == 0);
  (void)reader.js().deleteStream(source.stream());
  (void)reader.js().deleteStream(settledStreamOf(source));
}
