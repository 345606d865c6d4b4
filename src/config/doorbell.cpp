// The [[doorbell]] tables: the account each database server's binlog doorbell reads the binary log
// as (README, "The doorbell's account"), and the rules that tie them to the sources.
#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "config/keys.h"

namespace outbox {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::tuple<std::string, unsigned, std::string> serverOf(const Dsn& dsn) {
  return {lower(dsn.host), dsn.port, dsn.socket};
}

// "host:port" or the socket, as a message names a server.
std::string shownServer(const Dsn& dsn) {
  if (!dsn.socket.empty()) return dsn.socket;
  return dsn.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", dsn.host, dsn.port)
                                                 : fmt::format("{}:{}", dsn.host, dsn.port);
}

// A source's TLS settings as a message shows them.
std::string shownTls(const Dsn& dsn) {
  std::string out = fmt::format("ssl-mode={}", sslModeName(dsn.sslMode));
  if (!dsn.sslCa.empty()) out += ", ssl-ca=" + dsn.sslCa;
  if (!dsn.sslCert.empty()) out += ", ssl-cert=" + dsn.sslCert;
  if (!dsn.sslKey.empty()) out += ", ssl-key=" + dsn.sslKey;
  return out;
}

}  // namespace

bool sameServer(const Dsn& a, const Dsn& b) { return serverOf(a) == serverOf(b); }

bool sameTls(const Dsn& a, const Dsn& b) {
  return a.sslMode == b.sslMode && a.sslCa == b.sslCa && a.sslCert == b.sslCert && a.sslKey == b.sslKey;
}

const Dsn& Config::doorbellDsn(const SourceConfig& source) const {
  for (const auto& d : doorbells) {
    if (sameServer(d.dsn, source.dsn)) return d.dsn;
  }
  return source.dsn;
}

namespace config_detail {

const std::vector<Key<DoorbellConfig>>& doorbellKeys() {
  using D = DoorbellConfig;
  auto readDsn = [](Section& sec, D& d) {
    auto dsn = sec.str("dsn");
    if (!dsn) throw ConfigError(sec.keyName("dsn"), "is required (mysql://USER@HOST[:PORT]/[?PARAM=VALUE&...])");
    d.dsn = Dsn::parse(sec.keyName("dsn"), *dsn, false);
    checkDsnFiles(sec, d.dsn);
  };
  static const std::vector<Key<D>> keys{
      // As a source's: read before the section, from the file only.
      {"name", [](Section& sec, D&) { sec.markRead("name"); },
       [](const D& d) { return keyLine("name", tomlString(d.name)); }, "\"db_internal\"", sameMember(&D::name)},
      {"dsn", readDsn, writeDsn(&D::dsn), "\"mysql://watcher@db.internal:3307/?ssl-mode=VERIFY_IDENTITY\"",
       sameDsn(&D::dsn)},
      dsnPasswordKey<D>(&D::dsn, "\"w4tch-example\""),
  };
  return keys;
}

std::vector<DoorbellConfig> parseDoorbells(const toml::node* node, const Environment& env,
                                           std::set<std::string>& consulted) {
  if (node == nullptr) return {};
  const toml::array* list = node->as_array();
  if (list == nullptr) throw ConfigError("doorbell", "expected [[doorbell]] tables");
  std::vector<std::string> names;
  for (const toml::node& n : *list) {
    if (const toml::table* t = n.as_table()) {
      if (auto name = t->get_as<std::string>("name")) names.push_back(name->get());
    }
  }
  checkVariablesUnambiguous("doorbell", names, env);
  std::vector<DoorbellConfig> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const toml::table* t = (*list)[i].as_table();
    if (t == nullptr) throw ConfigError(fmt::format("doorbell[{}]", i), "expected a table");
    DoorbellConfig d;
    d.name = tableName(*t, "doorbell", i, env, "is required (it names the environment variables)");
    Section sec(t, fmt::format("doorbell.{}.", d.name), "OUTBOX_BRIDGE_DOORBELL_" + upper(d.name) + "_", env,
                consulted);
    readKeys(sec, doorbellKeys(), d);
    for (const auto& other : out) {
      if (lower(other.name) == lower(d.name)) throw ConfigError("doorbell." + d.name, "defined twice");
      if (sameServer(other.dsn, d.dsn)) {
        throw ConfigError(sec.keyName("dsn"), fmt::format("reaches {}, as doorbell {} does: one doorbell a server",
                                                          shownServer(d.dsn), other.name));
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

// A server's doorbell reads with one account, over one connection: its TLS must be what every
// source there asked for, or a source's row images would travel with less than its own.
void checkDoorbells(const Config& config) {
  for (const auto& d : config.doorbells) {
    const bool watches = std::any_of(config.sources.begin(), config.sources.end(), [&](const SourceConfig& s) {
      return s.wake != Wake::kPoll && sameServer(s.dsn, d.dsn);
    });
    if (!watches) {
      throw ConfigError("doorbell." + d.name + ".dsn",
                        fmt::format("no source with a doorbell (wake other than \"poll\") is on {}: give the "
                                    "address (host, port or socket) as the sources' DSNs do",
                                    shownServer(d.dsn)));
    }
  }
  std::map<std::tuple<std::string, unsigned, std::string>, const SourceConfig*> first;
  for (const auto& s : config.sources) {
    if (s.wake == Wake::kPoll || &config.doorbellDsn(s) != &s.dsn) continue;
    auto [it, fresh] = first.try_emplace(serverOf(s.dsn), &s);
    if (fresh || sameTls(it->second->dsn, s.dsn)) continue;
    throw ConfigError("doorbell",
                      fmt::format("sources {} ({}) and {} ({}) are on one server, {}, with different TLS settings, and "
                                  "its binlog doorbell reads every change there over one connection: add a "
                                  "[[doorbell]] for {} with name, dsn (its own account, and the TLS to use) and "
                                  "password_file (README, \"The doorbell's account\")",
                                  it->second->name, shownTls(it->second->dsn), s.name, shownTls(s.dsn),
                                  shownServer(s.dsn), shownServer(s.dsn)));
  }
}

}  // namespace config_detail

}  // namespace outbox
