#define BOOST_TEST_MODULE fault_settle
#include <boost/test/unit_test.hpp>

// The settled stream across crashes (issue 36; README, "The settled stream"): the leading bridge
// is SIGKILLed right after each burst of changes, mostly before the burst has settled, and the
// other bridge takes over. Every burst's last change of every key must reach the settled stream,
// none twice, none out of order for its key, each message standing for exactly the changes since
// its key's previous one.

#include <random>
#include <thread>

#include "lease_holder.h"
#include "settle_support.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(sigkill_during_bursts_loses_no_bursts_last_change_and_settles_none_twice) {
  TestDatabase database("settlek");
  SourceSpec source{uniqueName("settlek", database), &database,
                    {{"settle", "\"300ms\""}, {"settle_max", "\"3s\""}, {"batch_size", "50"}}};
  const std::string config = writeConfig({source}, "[lease]\nttl = \"2s\"\nheartbeat = \"500ms\"\n");
  migrate(config);
  std::vector<std::unique_ptr<BridgeProcess>> bridges;
  for (int i = 0; i < 2; ++i) bridges.push_back(std::make_unique<BridgeProcess>(config));
  for (auto& b : bridges) b->start();
  auto logs = [&] { return bridges[0]->log() + bridges[1]->log(); };
  auto leader = [&] { return leaseHolder(database, source.name, bridges, logs()); };
  auto producer = database.connect();
  StreamReader reader;
  std::mt19937 rng(3636);
  std::uniform_int_distribution<int> killAfterMs(0, 250);
  uint64_t total = 0;
  std::vector<std::map<std::string, uint64_t>> lastOfBurst;  // per burst: key -> its last version
  int killedPending = 0;  // kills that left some of the burst's keys unsettled
  for (int round = 0; round < 10; ++round) {
    BridgeProcess* victim = leader();
    const uint64_t firstVersion = total + 1;
    for (int tx = 0; tx < 4; ++tx) {
      std::vector<int> keys;
      for (int k = 0; k < 100; ++k) {
        if (rng() % 3 == 0) keys.push_back(k);
      }
      changeKeys(*producer, source.outboxTable(), keys, round * 10 + tx);
      total += keys.size();
      std::this_thread::sleep_for(40ms);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(killAfterMs(rng)));
    victim->kill();
    size_t settledAtKill = 0;  // of this burst's keys
    for (const auto& m : settledMessages(reader, source)) settledAtKill += m.version >= firstVersion ? 1 : 0;
    victim->start();
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return database.state(source.name).publishedThrough == total; }, 20s), logs());
    std::map<std::string, uint64_t> last;
    for (const auto& c : mainChanges(reader, source)) {
      if (c.version >= firstVersion) last[c.key] = c.version;
    }
    if (settledAtKill < last.size()) ++killedPending;
    lastOfBurst.push_back(std::move(last));
    std::this_thread::sleep_for(500ms);  // quiet for longer than settle: the next burst is another
  }
  // The kills must land before their bursts settled for this test to mean anything.
  BOOST_TEST(killedPending >= 6);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    std::set<uint64_t> settled;
    for (const auto& m : settledMessages(reader, source)) settled.insert(m.version);
    for (const auto& burst : lastOfBurst) {
      for (const auto& [key, version] : burst) {
        if (!settled.count(version)) return false;
      }
    }
    return true;
  }, 20s), "a burst's last change never settled\n" << logs());
  std::this_thread::sleep_for(500ms);  // nothing more comes
  // None twice, per key in order, each standing for exactly the changes since its key's last
  // message. (A burst the killed leader had only partly published reaches the main stream in two
  // parts, a lease's TTL apart: a key may then settle twice in it, as it was quiet in between.)
  BOOST_TEST(checkSettledWhole(mainChanges(reader, source), settledMessages(reader, source)) == "");
  for (auto& b : bridges) BOOST_TEST(b->stop() == 0);
  (void)reader.js().deleteStream(source.stream());
  (void)reader.js().deleteStream(settledStreamOf(source));
}
