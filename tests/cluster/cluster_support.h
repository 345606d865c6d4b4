#pragma once

// The three-node cluster of tools/stack (issue 11) as the cluster tests use it.

#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "workload.h"

namespace outbox::test {

// "nats://127.0.0.1:P1,...", the nodes outbox-n1..n3 in order; throws when tools/test did not
// start the cluster (nothing skips).
const std::string& clusterUrls();
// The client port of node 1..3.
int clusterNodePort(int node);
// The node ("outbox-n2" -> 2) a server name stands for; 0 for none.
int clusterNode(const std::string& serverName);
// The pid file of node 1..3, as tools/stack keeps it.
std::string clusterPidFile(int node);

// A [nats] table for `url` that notices a dead connection within ~3 s.
std::string clusterNatsToml(const std::string& url);

// One source on an R3 stream of the cluster, its bridge and producers writing the whole time.
class ClusterRun {
 public:
  // `natsUrl`: what the bridge is given (the cluster's list, or a proxy in front of one node).
  ClusterRun(const std::string& tag, const std::string& natsUrl);
  ~ClusterRun();
  // Whether `more` versions beyond those published when asked reach the stream within `timeout`.
  bool advances(uint64_t more, std::chrono::milliseconds timeout);
  // The node leading the stream now (0: none known).
  int streamLeader();
  // Stops the producers, waits for the bridge to publish every row, checks the stream against the
  // table (invariants 1-5), and stops the bridge (exit 0).
  void finish();
  BridgeProcess& bridge() { return *bridge_; }
  StreamReader& reader() { return reader_; }
  const SourceSpec& source() const { return source_; }

 private:
  TestDatabase database_;
  SourceSpec source_;
  std::string config_;
  StreamReader reader_;
  std::unique_ptr<BridgeProcess> bridge_;
  std::unique_ptr<Producers> producers_;
};

}  // namespace outbox::test
