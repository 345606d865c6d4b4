#include "cluster_support.h"

#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

namespace outbox::test {

using namespace std::chrono_literals;

const std::string& clusterUrls() {
  if (stack().natsClusterUrls.empty()) {
    throw std::runtime_error("OUTBOX_TEST_NATS_CLUSTER_URLS is not set: run through tools/test, which starts the cluster");
  }
  return stack().natsClusterUrls;
}

int clusterNodePort(int node) {
  std::stringstream list(clusterUrls());
  std::string url;
  for (int i = 0; i < node && std::getline(list, url, ','); ++i) {
  }
  return std::stoi(url.substr(url.rfind(':') + 1));
}

int clusterNode(const std::string& serverName) {
  return serverName.rfind("outbox-n", 0) == 0 ? std::stoi(serverName.substr(8)) : 0;
}

std::string clusterPidFile(int node) { return fmt::format("{}/nats-cluster/n{}/nats.pid", stack().stackDir, node); }

std::string clusterNatsToml(const std::string& url) {
  return fmt::format("[nats]\nurl = \"{}\"\nack_timeout = \"2s\"\nping_interval = \"1s\"\nconnect_timeout = \"2s\"\n", url);
}

namespace {

// Until the cluster can place an R3 stream: tools/stack waits for health and a meta leader, but a
// node resumed after a freeze counts as offline for placement until its next stats report (~30 s).
void waitUntilR3Placeable(StreamReader& reader, const std::string& tag) {
  nats::StreamSettings probe;
  probe.name = "PROBE_" + tag;
  probe.subject = "probe." + tag + ".>";
  probe.replicas = 3;
  std::string last;
  const bool placed = waitUntil([&] {
    Status s = reader.js().ensureStream(probe);
    if (!s.isOk()) {
      last = s.message();
      std::this_thread::sleep_for(500ms);
      return false;
    }
    (void)reader.js().deleteStream(probe.name);
    return true;
  }, 90s);
  if (!placed) throw std::runtime_error("the cluster cannot place an R3 stream: " + last);
}

}  // namespace

ClusterRun::ClusterRun(const std::string& tag, const std::string& natsUrl)
    : database_(tag), reader_((stackCommand("start", "nats-cluster"), clusterUrls())) {
  waitUntilR3Placeable(reader_, tag);
  source_ = SourceSpec{uniqueName(tag, database_), &database_, {{"replicas", "3"}, {"batch_size", "200"}}};
  config_ = writeConfig({source_}, clusterNatsToml(natsUrl));
  migrate(config_);
  bridge_ = std::make_unique<BridgeProcess>(config_);
  bridge_->start();
  producers_ = std::make_unique<Producers>([this] { return database_.connect(); },
                                           std::vector<std::string>{source_.outboxTable()});
  // tools/stack waited for every peer online; the stream's first leader election comes on top.
  BOOST_REQUIRE_MESSAGE(advances(500, 60s), bridge_->log());
  auto state = reader_.state(source_.stream());
  BOOST_TEST(state.replicas == 3);  // created R3
}

ClusterRun::~ClusterRun() {
  producers_->stop();
  if (bridge_->running()) bridge_->kill();
}

bool ClusterRun::advances(uint64_t more, std::chrono::milliseconds timeout) {
  return publishingAdvances(database_, source_.name, more, timeout);
}

int ClusterRun::streamLeader() {
  auto state = reader_.js().streamState(source_.stream());
  return state.isOk() ? clusterNode(state->leader) : 0;
}

void ClusterRun::finish() {
  producers_->stop();
  BOOST_TEST_MESSAGE(fmt::format("{}: {} producer transactions", source_.name, producers_->commits()));
  auto messages = requireStreamMatchesTable(database_, source_, reader_, 120s, [&] { return bridge_->log(); });
  BOOST_TEST(messages.size() > 1000u);
  BOOST_TEST(bridge_->stop() == 0);
}

}  // namespace outbox::test
