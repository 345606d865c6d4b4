#define BOOST_TEST_MODULE log
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <simdjson.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// Sets an environment variable for the life of the object (the bridge's children inherit it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

struct JsonLine {
  std::string time, level, source, message, command;
};

// Every non-empty line of `text` as a JSON log line; fails the test on a line that is not one.
std::vector<JsonLine> jsonLines(const std::string& text) {
  std::vector<JsonLine> lines;
  std::istringstream in(text);
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc) != simdjson::SUCCESS) {
      BOOST_ERROR("not a JSON line: " << line);
      continue;
    }
    JsonLine j;
    std::string_view v;
    BOOST_TEST((doc["time"].get_string().get(v) == simdjson::SUCCESS && v.size() == 27 && v.back() == 'Z'), line);
    j.time = std::string(v);
    BOOST_TEST((doc["level"].get_string().get(v) == simdjson::SUCCESS), line);
    j.level = std::string(v);
    BOOST_TEST((doc["message"].get_string().get(v) == simdjson::SUCCESS), line);
    j.message = std::string(v);
    BOOST_TEST((doc["command"].get_string().get(v) == simdjson::SUCCESS), line);
    j.command = std::string(v);
    if (doc["source"].get_string().get(v) == simdjson::SUCCESS) j.source = std::string(v);
    lines.push_back(j);
  }
  return lines;
}

}  // namespace

// [log] format = "json" (here OUTBOX_BRIDGE_LOG_FORMAT) is honoured by every command, results
// and diagnostics alike, with the source as a field and messages escaped. Before, only `run`
// read [log], and its lines were text with the source inside the message.
BOOST_AUTO_TEST_CASE(every_command_writes_json_lines_with_the_source_as_a_field) {
  TestDatabase database("logjson");
  SourceSpec source{uniqueName("js", database), &database, {}};
  std::string config = writeConfig({source});
  ScopedEnv json("OUTBOX_BRIDGE_LOG_FORMAT", "json");

  auto migrated = runBridge({"migrate", "--config", config});
  BOOST_REQUIRE_MESSAGE(migrated.exitCode == 0, migrated.err);
  auto migrateLines = jsonLines(migrated.out);
  BOOST_REQUIRE(!migrateLines.empty());
  BOOST_TEST(migrateLines[0].command == "migrate");
  BOOST_TEST(migrateLines[0].message.find("applied") != std::string::npos, migrateLines[0].message);
  BOOST_TEST(jsonLines(migrated.err).empty());

  // A poison row whose entity_type holds a quote and a backslash: the halt line must stay JSON.
  insertRows(database.sql(), source.outboxTable(), 5);
  BOOST_REQUIRE(database.sql().exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                                "('bad \"ty\\\\pe', 'k', 'upsert', '{{}}')", source.outboxTable())).isOk());
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return !database.state(source.name).haltedReason.empty(); }, 20s));
  BOOST_TEST(bridge.stop() == 0);
  auto runLines = jsonLines(bridge.log());
  bool sawHalt = false, sawSourceLine = false, sawProcessLine = false;
  for (const auto& l : runLines) {
    BOOST_TEST(l.command == "run");
    BOOST_TEST(l.message.find("[" + source.name + "]") == std::string::npos, "the source is a field, not text");
    sawSourceLine = sawSourceLine || l.source == source.name;
    sawProcessLine = sawProcessLine || (l.source.empty() && l.message.find("starting") != std::string::npos);
    if (l.level == "error" && l.message.find("bad \"ty\\pe") != std::string::npos) sawHalt = l.source == source.name;
  }
  BOOST_TEST(sawHalt, bridge.log());
  BOOST_TEST(sawSourceLine);
  BOOST_TEST(sawProcessLine);

  auto pruned = runBridge({"prune", "--config", config, "--keep", "10m", "--dry-run"});
  BOOST_REQUIRE_MESSAGE(pruned.exitCode == 0, pruned.err);
  auto pruneLines = jsonLines(pruned.out);
  BOOST_REQUIRE(pruneLines.size() == 1u);
  BOOST_TEST(pruneLines[0].source == source.name);
  BOOST_TEST(pruneLines[0].message.find("dry run, would delete 0 rows") != std::string::npos, pruneLines[0].message);

  // A runtime failure, too: no nats-server at this address.
  ScopedEnv nowhere("OUTBOX_BRIDGE_NATS_URL", "nats://127.0.0.1:1");
  auto bump = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "test"});
  BOOST_TEST(bump.exitCode == 1);
  auto bumpLines = jsonLines(bump.err);
  BOOST_REQUIRE(!bumpLines.empty());
  BOOST_TEST(bumpLines.back().level == "error");
}

// [log] level is honoured by every command: at warn, a successful prune and migrate say nothing.
BOOST_AUTO_TEST_CASE(every_command_honours_the_log_level) {
  TestDatabase database("loglevel");
  SourceSpec source{uniqueName("lv", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  auto chatty = runBridge({"prune", "--config", config, "--keep", "10m", "--dry-run"});
  BOOST_TEST(chatty.out.find("[" + source.name + "] prune: dry run") != std::string::npos, chatty.out);
  ScopedEnv quiet("OUTBOX_BRIDGE_LOG_LEVEL", "warn");
  auto pruned = runBridge({"prune", "--config", config, "--keep", "10m", "--dry-run"});
  BOOST_TEST(pruned.exitCode == 0);
  BOOST_TEST(pruned.out == "");
  auto migrated = runBridge({"migrate", "--config", config});
  BOOST_TEST(migrated.exitCode == 0);
  BOOST_TEST(migrated.out == "");
  BOOST_TEST(migrated.err == "");
}
