// `outbox-bridge replica` when its stream no longer holds what comes next — deleted and recreated
// under it, purged or emptied by max_age behind it while the source is quiet, renamed — against
// the real bridge, MariaDB and nats-server: each is a reason to bootstrap (docs/consumers.md
// section 3, "The stream itself"), and the replica must not wait for a message that cannot come
// (nats.c's ordered consumer recreates itself on a missing, shorter or emptied stream for ever,
// without a word).
#define BOOST_TEST_MODULE replica_stream
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "accounts_source.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// The replica command on `src`'s bridge, its log and its --dump in tempDir().
struct ReplicaProcess {
  std::string log;
  std::string dump;
  Subprocess process;

  // `natsUrl`: nats-server's, or a TcpProxy's in front of it.
  ReplicaProcess(AccountsSource& src, int port, const std::string& natsUrl)
      : log(tempDir() + "/replica-" + src.spec.name + ".log"), dump(tempDir() + "/replica-" + src.spec.name + ".json") {
    BOOST_REQUIRE(process.start({stack().bridgeBinary, "replica", "--url", fmt::format("http://127.0.0.1:{}", port),
                                 "--source", src.spec.name, "--nats", natsUrl, "--dump", dump, "--verify-interval",
                                 "0.1"},
                                log));
  }
  ~ReplicaProcess() {
    process.signal(SIGCONT);
    (void)process.terminate(std::chrono::seconds(10));
  }
  std::string text() const { return readFile(log); }
  bool says(const std::string& line) const { return text().find(line) != std::string::npos; }
  // Whether the log says `line` within `limit`; how long it took in `took`.
  bool saysWithin(const std::string& line, std::chrono::milliseconds limit, std::chrono::milliseconds* took = nullptr) {
    auto begin = std::chrono::steady_clock::now();
    bool said = waitUntil([&] { return says(line); }, limit);
    if (took) *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
    return said;
  }
};


void requirePublished(AccountsSource& src, BridgeProcess& bridge, uint64_t version) {
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() == version; }, 20s),
                        fmt::format("version {} was not published:\n{}", version, bridge.log()));
}

}  // namespace

// The stream deleted under a running replica and recreated by the bridge's next publish, shorter
// than the sequence the replica followed (after an epoch bump the recreated stream holds the
// bumped epoch's versions alone, from sequence 1): the replica bootstraps and ends equal to the
// table. Before the fix it stayed at the version it had (15, the source at 18), for ever.
BOOST_AUTO_TEST_CASE(the_stream_deleted_and_recreated_under_a_running_replica_it_bootstraps) {
  AccountsSource src("rsdel");
  BridgeProcess bridge(src.config);
  src.seedAndStart(bridge, 10);
  int port = bridge.httpPort();
  auto conn = src.database.connect();
  auto bump = runBridge({"epoch", "bump", "--config", src.config, "--source", src.spec.name, "--reason", "test"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  ReplicaProcess replica(src, port, stack().natsUrl);
  BOOST_REQUIRE_MESSAGE(replica.saysWithin("] bootstrapped: epoch 2, watermark 10,", 30s), replica.text());
  // Taken from the stream: nats.c recreates its ordered consumer from the sequence after the last
  // one it delivered (from sequence 1 when none was, which would hide the recreation).
  for (uint64_t i = 1; i <= 5; ++i) src.change(*conn, i, fmt::format("Epoch 2 {}", i));
  uint64_t before = src.lastVersion();
  requirePublished(src, bridge, before);
  BOOST_REQUIRE_MESSAGE(replica.saysWithin(fmt::format("] verified at version {}:", before), 30s), replica.text());
  StreamReader reader;
  const std::string stream = src.spec.stream();
  uint64_t followed = reader.state(stream).lastSeq;

  auto deletedAt = std::chrono::steady_clock::now();
  BOOST_REQUIRE(reader.js().deleteStream(stream).isOk());
  src.change(*conn, 3, std::nullopt, true);
  src.change(*conn, 40, "After the stream was recreated");
  src.change(*conn, 4, "Renamed after the stream was recreated");
  uint64_t final = src.lastVersion();
  requirePublished(src, bridge, final);
  uint64_t last = reader.state(stream).lastSeq;
  BOOST_REQUIRE_MESSAGE(last < followed, fmt::format("the recreated stream ends at {}, not below the sequence {} the "
                                                     "replica followed: this test would not test the recreation",
                                                     last, followed));

  // At `final` by a bootstrap (no "verified" line follows one: it is its own check), or by
  // following the recreated stream after a bootstrap at an earlier version.
  auto atFinal = [&] {
    return replica.says(fmt::format("] re-bootstrapped: epoch 2, watermark {},", final)) ||
           replica.says(fmt::format("] verified at version {}:", final));
  };
  BOOST_REQUIRE_MESSAGE(waitUntil(atFinal, 30s), replica.text());
  BOOST_TEST_MESSAGE(fmt::format("stream deleted and recreated: at version {} {} ms after the deletion", final,
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - deletedAt).count()));
  BOOST_TEST(replica.says(": re-bootstrapping"), replica.text());
  BOOST_TEST(replica.says("] re-bootstrapped: epoch 2"), replica.text());
  BOOST_TEST(replica.process.terminate(10s).value_or(-1) == 0);  // --dump: written at exit too
  std::string dump = readFile(replica.dump);
  BOOST_TEST(dump.find(fmt::format("\"appliedVersion\":{}", final)) != std::string::npos, dump);
  BOOST_TEST(dump.find(src.dumpRecords()) != std::string::npos, dump << "\nexpected " << src.dumpRecords());
  BOOST_TEST(bridge.stop() == 0);
}

namespace {

// The stream emptied (purged, or by max_age) while the source is quiet, behind a replica paused
// (SIGSTOP) long enough for nats-server to drop its connection (no PONG for ping_interval ×
// ping_max: minutes at the defaults; a TcpProxy drops it at once here) while the last changes
// were published: nothing more is written, so no later message can show it a gap, and its ordered
// consumer, recreated from the sequence after the last one it took, waits on an emptied stream.
// It bootstraps within 15 s of SIGCONT (a reconnect, the summary every 0.1 s ± 20% at
// --verify-interval 0.1, then the stream's first sequence). Before the fix it stayed at 20 (the
// source at 26).
void emptiedBehindAPausedReplica(bool purge) {
  const std::string how = purge ? "purged" : "emptied by max_age";
  std::map<std::string, std::string> keys;
  if (!purge) keys = {{"max_age", "\"2s\""}, {"duplicate_window", "\"1s\""}};
  AccountsSource src(purge ? "rspur" : "rsage", "", keys);
  BridgeProcess bridge(src.config);
  src.seedAndStart(bridge, 20);
  int port = bridge.httpPort();
  auto conn = src.database.connect();
  const int natsPort = std::stoi(stack().natsUrl.substr(stack().natsUrl.rfind(':') + 1));
  TcpProxy proxy(natsPort);
  ReplicaProcess replica(src, port, fmt::format("nats://127.0.0.1:{}", proxy.port()));
  BOOST_REQUIRE_MESSAGE(replica.saysWithin("] verified at version 20:", 30s), replica.text());

  replica.process.signal(SIGSTOP);
  proxy.retarget(natsPort);  // its connection closed; a new one goes through
  std::this_thread::sleep_for(500ms);  // closed: the proxy's pipe looks every 50 ms
  for (uint64_t i = 1; i <= 5; ++i) src.change(*conn, i, fmt::format("Missed {}", i));
  src.change(*conn, 21, "Missed too");
  uint64_t final = src.lastVersion();
  requirePublished(src, bridge, final);
  StreamReader reader;
  const std::string stream = src.spec.stream();
  if (purge) BOOST_REQUIRE(reader.js().purgeStream(stream).isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return reader.state(stream).messages == 0; }, 10s), "the stream is not empty");
  replica.process.signal(SIGCONT);

  std::chrono::milliseconds took{};
  const std::string rebootstrapped = fmt::format("] re-bootstrapped: epoch 1, watermark {}, 21 records", final);
  BOOST_REQUIRE_MESSAGE(replica.saysWithin(rebootstrapped, 15s, &took), replica.text());
  BOOST_TEST_MESSAGE(fmt::format("stream {}, source quiet: re-bootstrapped {} ms after SIGCONT", how, took.count()));
  BOOST_TEST(replica.says(fmt::format("begins at sequence {}: sequence 21 was purged or expired: re-bootstrapping",
                                      reader.state(stream).firstSeq)),
             replica.text());
  BOOST_TEST(replica.process.terminate(10s).value_or(-1) == 0);  // --dump: written at exit too
  std::string dump = readFile(replica.dump);
  BOOST_TEST(dump.find(fmt::format("\"appliedVersion\":{}", final)) != std::string::npos, dump);
  BOOST_TEST(dump.find(src.dumpRecords()) != std::string::npos, dump << "\nexpected " << src.dumpRecords());
  BOOST_TEST(bridge.stop() == 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_stream_purged_behind_a_paused_replica_of_a_quiet_source_it_bootstraps) {
  emptiedBehindAPausedReplica(true);
}

BOOST_AUTO_TEST_CASE(the_stream_emptied_by_max_age_behind_a_paused_replica_of_a_quiet_source_it_bootstraps) {
  emptiedBehindAPausedReplica(false);
}

// The source's stream renamed (`stream =` changed, the bridge restarted on the same address) and
// the old one deleted, with one change written after: only the summary names the new stream. The
// replica bootstraps onto it. Before the fix it waited on the deleted one, at 10, for ever.
BOOST_AUTO_TEST_CASE(the_stream_renamed_the_replica_bootstraps_onto_the_new_one) {
  AccountsSource src("rsren");
  auto bridge = std::make_unique<BridgeProcess>(src.config);
  src.seedAndStart(*bridge, 10);
  int port = bridge->httpPort();
  auto conn = src.database.connect();
  ReplicaProcess replica(src, port, stack().natsUrl);
  BOOST_REQUIRE_MESSAGE(replica.saysWithin("] verified at version 10:", 30s), replica.text());

  const std::string old = src.spec.stream();
  BOOST_REQUIRE(bridge->stop() == 0);
  StreamReader reader;
  BOOST_REQUIRE(reader.js().deleteStream(old).isOk());
  src.spec.extra["stream"] = "\"" + old + "_RENAMED\"";
  bridge = std::make_unique<BridgeProcess>(writeConfig({src.spec}, fmt::format("[http]\nlisten = \"127.0.0.1:{}\"\n", port)));
  bridge->start();
  BOOST_REQUIRE(bridge->httpPort() == port);
  src.change(*conn, 11, "In the renamed stream");
  requirePublished(src, *bridge, 11);

  const std::string told =
      fmt::format("] the source now publishes to stream {}_RENAMED, not {}: re-bootstrapping", old, old);
  BOOST_REQUIRE_MESSAGE(replica.saysWithin(told, 30s), replica.text());
  auto at11 = [&] {
    return replica.says("] re-bootstrapped: epoch 1, watermark 11,") || replica.says("] verified at version 11:");
  };
  BOOST_REQUIRE_MESSAGE(waitUntil(at11, 20s), replica.text());
  BOOST_TEST(replica.says(fmt::format("following {}_RENAMED from sequence", old)), replica.text());
  BOOST_TEST(replica.process.terminate(10s).value_or(-1) == 0);  // --dump: written at exit too
  std::string dump = readFile(replica.dump);
  BOOST_TEST(dump.find(src.dumpRecords()) != std::string::npos, dump << "\nexpected " << src.dumpRecords());
  BOOST_TEST(bridge->stop() == 0);
}
