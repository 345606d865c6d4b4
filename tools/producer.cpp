// outbox-demo-producer: the demo's business service. Each change is one transaction that
// writes the business row and then its outbox row built from it (the producer rule, README).
// Some transactions roll back on purpose, to show that their outbox rows never reach the stream.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "config/config.h"
#include "db/connection.h"

namespace {
volatile std::sig_atomic_t stopRequested = 0;
void onSignal(int) { stopRequested = 1; }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"outbox-demo-producer: writes accounts and stocks with their outbox rows"};
  std::string dsnText, password, passwordFile;
  double rate = 5;
  int64_t total = 0;
  double rollbackShare = 0.05;
  app.add_option("--dsn", dsnText, "mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE")->required();
  app.add_option("--password", password, "database password (else from the DSN; prefer --password-file)");
  app.add_option("--password-file", passwordFile, "read the database password from this file (e.g. a secret)")
      ->check(CLI::ExistingFile)
      ->excludes("--password");
  app.add_option("--rate", rate, "changes per second (default 5)")->check(CLI::PositiveNumber);
  app.add_option("--count", total, "stop after this many committed changes (default: run until stopped)");
  app.add_option("--rollback-share", rollbackShare, "share of transactions rolled back (default 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  CLI11_PARSE(app, argc, argv);

  outbox::Dsn dsn;
  try {
    dsn = outbox::Dsn::parse("--dsn", dsnText);
  } catch (const outbox::ConfigError& e) {
    std::fprintf(stderr, "outbox-demo-producer: %s\n", e.what());
    return 2;
  }
  if (!passwordFile.empty()) {
    std::ifstream in(passwordFile);
    std::getline(in, password);  // one line; a trailing newline is not part of the password
  }
  if (!password.empty()) dsn.password = password;
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  outbox::db::initLibrary();
  auto opened = outbox::db::Connection::open(outbox::db::paramsFrom(dsn));
  if (!opened.isOk()) {
    std::fprintf(stderr, "outbox-demo-producer: %s\n", opened.status().message().c_str());
    return 1;
  }
  auto& db = **opened;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0, 1);
  const char* names[] = {"Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent", "Stark"};
  auto interval = std::chrono::duration<double>(1.0 / rate);
  auto next = std::chrono::steady_clock::now();
  int64_t committed = 0, rolledBack = 0;
  while (!stopRequested && (total == 0 || committed < total)) {
    std::string name = fmt::format("{} {}", names[rng() % 8], rng() % 1000);
    double pick = unit(rng);
    bool stock = pick < 0.1;
    bool rename = pick < 0.5;
    bool rollback = unit(rng) < rollbackShare;
    std::vector<std::string> statements{"START TRANSACTION"};
    if (stock) {
      // A stock renamed: the same rule, another source.
      statements.push_back(fmt::format(
          "UPDATE stocks SET company_name = {} WHERE ticker = (SELECT ticker FROM (SELECT ticker FROM stocks ORDER BY "
          "RAND() LIMIT 1) pick)",
          db.quote(name + " Holdings")));
      statements.push_back(
          "INSERT INTO stock_control_outbox (entity_type, entity_key, op, payload) "
          "SELECT 'stock', ticker, 'upsert', JSON_OBJECT('ticker', ticker, 'companyName', company_name) "
          "FROM stocks WHERE company_name = " + db.quote(name + " Holdings") + " LIMIT 1");
    } else if (rename) {
      statements.push_back(fmt::format(
          "UPDATE accounts SET display_name = {} WHERE id = (SELECT id FROM (SELECT id FROM accounts ORDER BY RAND() "
          "LIMIT 1) pick)",
          db.quote(name)));
      statements.push_back(
          "INSERT INTO account_control_outbox (entity_type, entity_key, op, payload) "
          "SELECT 'account', id, 'upsert', JSON_OBJECT('id', id, 'displayName', display_name) "
          "FROM accounts WHERE id = (SELECT MAX(id) FROM accounts WHERE display_name = " + db.quote(name) + ")");
    } else {
      statements.push_back(fmt::format("INSERT INTO accounts (display_name) VALUES ({})", db.quote(name)));
      statements.push_back(
          "INSERT INTO account_control_outbox (entity_type, entity_key, op, payload) "
          "SELECT 'account', id, 'upsert', JSON_OBJECT('id', id, 'displayName', display_name) "
          "FROM accounts WHERE id = LAST_INSERT_ID()");
    }
    statements.push_back(rollback ? "ROLLBACK" : "COMMIT");
    for (const auto& sql : statements) {
      if (auto s = db.exec(sql); !s.isOk()) {
        std::fprintf(stderr, "outbox-demo-producer: %s\n", s.message().c_str());
        db.rollback();
        return 1;
      }
    }
    (rollback ? rolledBack : committed)++;
    if ((committed + rolledBack) % 100 == 0) {
      std::fprintf(stderr, "outbox-demo-producer: %lld committed, %lld rolled back\n",
                   static_cast<long long>(committed), static_cast<long long>(rolledBack));
    }
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
    std::this_thread::sleep_until(next);
  }
  std::fprintf(stderr, "outbox-demo-producer: done, %lld committed, %lld rolled back\n",
               static_cast<long long>(committed), static_cast<long long>(rolledBack));
  return 0;
}
