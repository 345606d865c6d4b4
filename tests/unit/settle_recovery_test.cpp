// Where a new leader's reads begin (src/settle/settle_recovery.cpp): the binary search over a
// stream with deleted messages and a purge, against a plain scan.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>

#include "settle_fake_stream.h"

using outbox::test::FakeStream;

namespace {

// The sequence a plain scan finds: the first stored message with `header` above `value`, else
// one past the last.
uint64_t scan(const FakeStream& s, const char* header, uint64_t value) {
  for (uint64_t seq = 1; seq <= s.size(); ++seq) {
    const auto& m = s.message(seq);
    if (m && std::stoull(m->headers.at(header)) > value) return seq;
  }
  return s.size() + 1;
}

// The first stored message at or after `seq` (or one past the last).
uint64_t storedFrom(const FakeStream& s, uint64_t seq) {
  while (seq <= s.size() && !s.message(seq)) ++seq;
  return seq;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_search_finds_where_versions_pass_a_value_in_log_reads) {
  FakeStream s;
  uint64_t version = 0;
  for (int i = 0; i < 1000; ++i) {
    version += 1 + static_cast<uint64_t>(i % 3 == 0 ? 5 : 0);  // gaps, as an epoch bump leaves
    s.append({{"Outbox-Version", std::to_string(version)}});
  }
  const auto bound = static_cast<size_t>(std::ceil(std::log2(1001.0))) + 1;
  for (uint64_t v = 0; v <= version + 1; ++v) {
    s.reads = 0;
    auto got = outbox::firstSeqAbove(s, "Outbox-Version", v);
    BOOST_TEST_REQUIRE(got.isOk());
    BOOST_TEST(*got == scan(s, "Outbox-Version", v));
    BOOST_TEST(s.reads <= bound);
  }
}

BOOST_AUTO_TEST_CASE(the_search_walks_over_deleted_messages_and_a_purge) {
  for (unsigned seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    FakeStream s;
    for (uint64_t v = 1; v <= 300; ++v) s.append({{"Outbox-Settled-Seen", std::to_string(v * 2)}});
    std::uniform_int_distribution<uint64_t> pick(1, 300), run(1, 40);
    for (int i = 0; i < 8; ++i) {  // runs of deleted messages, the last one included at times
      const uint64_t from = pick(rng), n = run(rng);
      for (uint64_t q = from; q < from + n && q <= 300; ++q) s.remove(q);
    }
    if (seed % 3 == 0) s.purgeBefore(pick(rng));
    for (uint64_t value = 0; value <= 602; value += 3) {
      auto got = outbox::firstSeqAbove(s, "Outbox-Settled-Seen", value);
      BOOST_TEST_REQUIRE(got.isOk());
      // Reading from what the search says, the first message is the one the scan finds.
      BOOST_TEST(storedFrom(s, *got) == scan(s, "Outbox-Settled-Seen", value),
                 "seed " << seed << " value " << value);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_empty_or_purged_stream_is_read_from_its_next_sequence) {
  FakeStream s;
  BOOST_TEST(*outbox::firstSeqAbove(s, "Outbox-Version", 0) == 1u);
  BOOST_TEST(!outbox::lastSettled(s)->has_value());
  s.append({{"Outbox-Version", "1"}});
  s.append({{"Outbox-Version", "2"}});
  s.purgeBefore(3);
  BOOST_TEST(*outbox::firstSeqAbove(s, "Outbox-Version", 0) == 3u);
  BOOST_TEST(!outbox::lastSettled(s)->has_value());
}

BOOST_AUTO_TEST_CASE(the_last_settled_message_is_found_behind_deleted_ones) {
  FakeStream s;
  s.append({{"Outbox-Entity-Type", "t"},
            {"Outbox-Entity-Key", "k"},
            {"Outbox-Version", "9"},
            {"Outbox-Settled-Through", "4"},
            {"Outbox-Settled-Seen", "9"}});
  s.append({{"Outbox-Version", "10"}});  // no marks: deleted below, else a message not ours
  s.remove(2);
  auto last = outbox::lastSettled(s);
  BOOST_TEST_REQUIRE(last.isOk());
  BOOST_TEST_REQUIRE(last->has_value());
  BOOST_TEST((*last)->through == 4u);
  s.append({{"Outbox-Version", "11"}});
  BOOST_TEST(outbox::lastSettled(s).status().isPermanent());
  FakeStream main;
  main.append({{"Outbox-Version", "1"}});
  main.append({{"Nats-Msg-Id", "x"}});
  BOOST_TEST(outbox::firstSeqAbove(main, "Outbox-Version", 5).status().isPermanent());
}

BOOST_AUTO_TEST_CASE(a_stored_time_maps_onto_the_steady_clock_never_past_now) {
  const outbox::Clock::TimePoint now{std::chrono::hours(5)};
  const int64_t wall = 1'700'000'000'000'000'000;
  BOOST_TEST(
      (outbox::steadyTimeOf(wall - 2'000'000'000, now, wall) == now - std::chrono::seconds(2)));
  BOOST_TEST((outbox::steadyTimeOf(wall + 5'000'000'000, now, wall) == now));
}
