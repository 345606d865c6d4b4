// `check-config`'s rendering of a config, secrets masked: TOML that parses back to the same config.
#include <fmt/format.h>

#include "common/json.h"
#include "config/keys.h"

namespace outbox {

namespace config_detail {
// JSON's string escapes are TOML's, but TOML wants DEL escaped too.
std::string tomlString(const std::string& s) {
  std::string out = jsonQuoted(s);
  for (size_t at = out.find('\x7f'); at != std::string::npos; at = out.find('\x7f', at)) out.replace(at, 1, "\\u007f");
  return out;
}
std::string maskedSecret(const std::string& secret) {
  return secret.empty() ? "\"\"" : "\"" + std::string(kMinAdminTokenBytes, '*') + "\"";
}
}  // namespace config_detail

namespace {
using config_detail::tomlString;
const auto& quoted = tomlString;
const auto& mask = config_detail::maskedSecret;
// An optional key that must not be empty when given (paths, names): a comment line when unset.
std::string optional(const char* key, const std::string& value) {
  return value.empty() ? fmt::format("# {} is not set\n", key) : fmt::format("{} = {}\n", key, quoted(value));
}
}  // namespace

std::string renderMasked(const Config& c) {
  std::string out;
  out += fmt::format("[log]\nlevel = {}\nformat = {}\n\n", quoted(c.logLevel),
                     quoted(c.logFormat == LogFormat::kJson ? "json" : "text"));
  out += fmt::format("[nats]\nurl = {}\nuser = {}\npassword = {}\ntoken = {}\n", quoted(c.nats.url),
                     quoted(c.nats.user), mask(c.nats.password), mask(c.nats.token));
  out += optional("creds_file", c.nats.credsFile) + optional("nkey_seed_file", c.nats.nkeySeedFile) +
         optional("tls_ca", c.nats.tlsCa) + optional("tls_cert", c.nats.tlsCert) + optional("tls_key", c.nats.tlsKey) +
         optional("tls_server_name", c.nats.tlsServerName) + optional("js_domain", c.nats.jsDomain);
  out += fmt::format("connect_timeout = {}\nping_interval = {}\nack_timeout = {}\nmax_pending = {}\n\n",
                     quoted(formatDuration(c.nats.connectTimeout)), quoted(formatDuration(c.nats.pingInterval)),
                     quoted(formatDuration(c.nats.ackTimeout)), c.nats.maxPending);
  out += fmt::format("[http]\nlisten = {}\n", quoted(c.http.listen)) + optional("tls_cert", c.http.tlsCert) +
         optional("tls_key", c.http.tlsKey);
  out += fmt::format("metrics_listen = {}\nadmin_token = {}\nmax_snapshot_streams = {}\nstuck_after = {}\n\n",
                     quoted(c.http.metricsListen), mask(c.http.adminToken), c.http.maxSnapshotStreams,
                     quoted(formatDuration(c.http.stuckAfter)));
  out += fmt::format("[lease]\nttl = {}\nheartbeat = {}\n\n", quoted(formatDuration(c.lease.ttl)),
                     quoted(formatDuration(c.lease.heartbeat)));
  out += fmt::format("[database]\nmax_connections = {}\n", c.database.maxConnections);
  for (const auto& s : c.sources) {
    out += "\n[[source]]\n";
    for (const auto& key : config_detail::sourceKeys()) out += key.write(s);
  }
  for (const auto& d : c.doorbells) {
    out += "\n[[doorbell]]\n";
    for (const auto& key : config_detail::doorbellKeys()) out += key.write(d);
  }
  return out;
}

}  // namespace outbox
