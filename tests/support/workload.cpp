#include "workload.h"

#include <map>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

namespace outbox::test {

Producers::Producers(Connect connect, std::vector<std::string> tables, int threads, std::chrono::milliseconds pause)
    : connect_(std::move(connect)), tables_(std::move(tables)), pause_(pause) {
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { produce(t); });
}

Producers::~Producers() { stop(); }

void Producers::stop() {
  stopping_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Producers::produce(int thread) {
  // Producers started one after another in a test write entities of their own.
  static std::atomic<int> instances{0};
  const int producer = instances++;
  std::mt19937 rng(static_cast<unsigned>(7919 * (thread + 1)));
  std::unique_ptr<db::Connection> conn;
  uint64_t n = 0;
  size_t table = static_cast<size_t>(thread);
  while (!stopping_) {
    if (!conn) {
      try {
        conn = connect_();
      } catch (const std::exception&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
    }
    const std::string& into = tables_[table++ % tables_.size()];
    std::string values;
    const int rows = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < rows; ++i, ++n) {
      values += fmt::format("{}('item', 'p{}-{}', 'upsert', '{{\"n\": {}, \"p\": {}}}')", i ? "," : "", producer, n % 5,
                            n, producer);
    }
    Status s = conn->begin();
    if (s.isOk()) {
      s = conn->exec(fmt::format("INSERT INTO `{}` (entity_type, entity_key, op, payload) VALUES {}", into, values));
    }
    if (s.isOk()) s = conn->commit();
    if (s.isOk()) {
      ++commits_;
    } else {
      conn.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    std::this_thread::sleep_for(pause_);
  }
}

namespace {

int64_t payloadN(const std::string& data) {
  auto at = data.find("\"n\": ");
  return at == std::string::npos ? -1 : std::stoll(data.substr(at + 5));
}

}  // namespace

std::string checkEntityOrder(const std::vector<nats::StoredMessage>& messages) {
  std::map<std::string, int64_t> last;
  for (const auto& m : messages) {
    auto key = m.headers.find("Outbox-Entity-Key");
    if (key == m.headers.end()) return fmt::format("seq {} has no Outbox-Entity-Key", m.seq);
    int64_t n = payloadN(m.data);
    auto [it, fresh] = last.emplace(key->second, n);
    if (!fresh && n <= it->second) {
      return fmt::format("entity {}: n {} (seq {}) after n {}", key->second, n, m.seq, it->second);
    }
    it->second = n;
  }
  return "";
}

uint64_t publishedThrough(TestDatabase& database, const std::string& source) {
  try {
    return database.state(source).publishedThrough;
  } catch (const std::exception&) {
    return 0;
  }
}

bool publishingAdvances(TestDatabase& database, const std::string& source, uint64_t more,
                        std::chrono::milliseconds timeout) {
  const uint64_t from = publishedThrough(database, source);
  return waitUntil([&] { return publishedThrough(database, source) >= from + more; }, timeout);
}

std::vector<nats::StoredMessage> requireStreamMatchesTable(TestDatabase& database, const SourceSpec& source,
                                                           StreamReader& reader, std::chrono::seconds timeout,
                                                           const std::function<std::string()>& context) {
  const std::string table = source.outboxTable();
  uint64_t rows = 0;
  SourceState state;
  bool complete = waitUntil(
      [&] {
        try {
          state = database.state(source.name);
          rows = database.scalar(fmt::format("SELECT COUNT(*) FROM `{}`", table));
          return state.haltedReason.empty() && database.unversioned(table) == 0 &&
                 state.publishedThrough == state.assignedThrough;
        } catch (const std::exception&) {
          return false;  // the server is coming back
        }
      },
      timeout);
  if (!complete) {
    throw std::runtime_error(fmt::format("source {} did not publish every row in time: {} rows, assigned {}, published {}, "
                                         "halted '{}'\n{}",
                                         source.name, rows, state.assignedThrough, state.publishedThrough,
                                         state.haltedReason, context()));
  }
  // A cluster that just healed may answer "JetStream system temporarily unavailable" for a while,
  // or a node back from a freeze may answer for the stream from its state before it (its last
  // sequence then): read again until the stream holds what the table says, or the time is up.
  std::vector<nats::StoredMessage> current;
  std::string violation;
  bool matched = waitUntil(
      [&] {
        std::vector<nats::StoredMessage> all;
        try {
          all = reader.readAll(source.stream(), "control." + source.name);
        } catch (const std::exception& e) {
          violation = fmt::format("could not be read: {}", e.what());
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          return false;
        }
        current.clear();
        uint64_t firstVersion = 0;
        for (auto& m : all) {
          if (headerU64(m, "Outbox-Epoch") != state.epoch) continue;
          if (firstVersion == 0) firstVersion = headerU64(m, "Outbox-Version");
          current.push_back(std::move(m));
        }
        // Rows from firstVersion on: all of them, when the epoch began at version 1.
        const uint64_t expected =
            firstVersion <= 1 ? rows
                              : database.scalar(fmt::format("SELECT COUNT(*) FROM `{}_versions` WHERE version >= {}",
                                                            table, firstVersion));
        violation = checkDenseOnce(current, source.name, expected, std::max<uint64_t>(firstVersion, 1));
        if (violation.empty()) violation = checkEntityOrder(current);
        if (violation.empty()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        return false;
      },
      timeout);
  if (!matched) throw std::runtime_error(fmt::format("stream {}: {}\n{}", source.stream(), violation, context()));
  return current;
}

}  // namespace outbox::test
