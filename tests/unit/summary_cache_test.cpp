#define BOOST_TEST_MODULE summary_cache
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "snapshot/summary_cache.h"

using namespace outbox;
using namespace std::chrono_literals;

namespace {

// A clock the test moves by hand.
struct TestClock {
  std::atomic<SummaryCache::Clock::rep> ticks{0};
  std::function<SummaryCache::Clock::time_point()> fn() {
    return [this] { return SummaryCache::Clock::time_point(SummaryCache::Clock::duration(ticks.load())); };
  }
  void advance(std::chrono::milliseconds d) {
    ticks += std::chrono::duration_cast<SummaryCache::Clock::duration>(d).count();
  }
};

SnapshotHeader at(uint64_t watermark) {
  SnapshotHeader h;
  h.source = "a";
  h.watermark = watermark;
  h.recordCount = watermark * 2;
  h.checksum = watermark * 7919;
  return h;
}

}  // namespace

// Requests that arrive while one reads wait for that read: one read for all of them, each given
// its header (watermark, count and checksum together).
BOOST_AUTO_TEST_CASE(requests_during_a_read_share_it) {
  TestClock clock;
  SummaryCache cache(60s, clock.fn());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> reads{0};
  std::atomic<int> entered{0};
  auto read = [&]() -> Result<SnapshotHeader> {
    ++reads;
    released.wait();
    return at(42);
  };
  std::vector<std::future<Result<SummaryCache::Served>>> answers;
  for (int i = 0; i < 8; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      ++entered;
      return cache.get(read);
    }));
  }
  // Every request is in get() and the first is reading before the read ends.
  while (entered.load() < 8 || reads.load() < 1) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(50ms);
  release.set_value();
  int read_ = 0, shared = 0;
  for (auto& a : answers) {
    auto served = a.get();
    BOOST_REQUIRE(served.isOk());
    BOOST_TEST(served->header.watermark == 42u);
    BOOST_TEST(served->header.checksum == 42u * 7919);
    read_ += served->from == SummaryCache::From::kRead;
    shared += served->from == SummaryCache::From::kShared;
  }
  BOOST_TEST(reads.load() == 1);
  BOOST_TEST(read_ == 1);
  BOOST_TEST(shared + read_ <= 8);  // a request that came after the read ended got the cache's
}

// Within the interval the summary kept is served as it was read, with its age; after it, the
// next request reads again.
BOOST_AUTO_TEST_CASE(a_summary_is_kept_for_the_interval_then_read_again) {
  TestClock clock;
  SummaryCache cache(60s, clock.fn());
  uint64_t watermark = 10;
  int reads = 0;
  auto read = [&]() -> Result<SnapshotHeader> {
    ++reads;
    return at(watermark);
  };
  auto first = cache.get(read);
  BOOST_REQUIRE(first.isOk());
  BOOST_TEST((first->from == SummaryCache::From::kRead));
  BOOST_TEST((first->freshFor == 60s));
  watermark = 11;  // the source moves on
  clock.advance(59s);
  auto kept = cache.get(read);
  BOOST_REQUIRE(kept.isOk());
  BOOST_TEST((kept->from == SummaryCache::From::kCache));
  BOOST_TEST(kept->header.watermark == 10u);
  BOOST_TEST(kept->header.checksum == 10u * 7919);
  BOOST_TEST((kept->age == 59s));
  BOOST_TEST((kept->freshFor == 1s));
  BOOST_TEST((kept->readAt == first->readAt));
  clock.advance(1s);
  auto again = cache.get(read);
  BOOST_REQUIRE(again.isOk());
  BOOST_TEST((again->from == SummaryCache::From::kRead));
  BOOST_TEST(again->header.watermark == 11u);
  BOOST_TEST(reads == 2);
}

// Interval 0: every request reads.
BOOST_AUTO_TEST_CASE(interval_zero_reads_every_time) {
  TestClock clock;
  SummaryCache cache(0ms, clock.fn());
  int reads = 0;
  auto read = [&]() -> Result<SnapshotHeader> { return at(++reads); };
  BOOST_TEST(cache.get(read)->header.watermark == 1u);
  BOOST_TEST(cache.get(read)->header.watermark == 2u);
  BOOST_TEST((cache.get(read)->freshFor == 0ms));
}

// A failed read is its waiters' answer too, and is not kept: the next request reads again.
BOOST_AUTO_TEST_CASE(a_failed_read_is_not_kept) {
  TestClock clock;
  SummaryCache cache(60s, clock.fn());
  bool fail = true;
  auto read = [&]() -> Result<SnapshotHeader> {
    if (fail) return Status::transient("the database is down");
    return at(5);
  };
  auto failed = cache.get(read);
  BOOST_REQUIRE(!failed.isOk());
  BOOST_TEST(failed.status().message() == "the database is down");
  fail = false;
  auto next = cache.get(read);
  BOOST_REQUIRE(next.isOk());
  BOOST_TEST((next->from == SummaryCache::From::kRead));
}
