// `check-config`'s rendering of a config, secrets masked: TOML that parses back to the same config.
#include <fmt/format.h>

#include "common/json.h"
#include "config/config.h"
#include "config/subject_template.h"

namespace outbox {

namespace {
// A TOML basic string: quotes, backslashes and control characters escaped, so that no value can
// end its line early or forge another (a newline in a value, a multi-line snapshot_query). JSON's
// string escapes are TOML's, but TOML wants DEL escaped too.
std::string quoted(const std::string& s) {
  std::string out = jsonQuoted(s);
  for (size_t at = out.find('\x7f'); at != std::string::npos; at = out.find('\x7f', at)) out.replace(at, 1, "\\u007f");
  return out;
}
// A set secret as asterisks, as many as the shortest admin_token takes, so the output parses back.
std::string mask(const std::string& secret) {
  return secret.empty() ? "\"\"" : "\"" + std::string(kMinAdminTokenBytes, '*') + "\"";
}
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
    out += fmt::format("\n[[source]]\nname = {}\ndsn = {}\noutbox_table = {}\nsnapshot_query = {}\n", quoted(s.name),
                       quoted(s.dsn.masked()), quoted(s.outboxTable), quoted(s.snapshotQuery));
    out += fmt::format("stream = {}\nsubject_prefix = {}\nbatch_size = {}\npoll_interval = {}\n", quoted(s.stream),
                       quoted(s.subjectPrefix), s.batchSize, quoted(formatDuration(s.pollInterval)));
    out += fmt::format("summary_interval = {}\n", quoted(formatDuration(s.summaryInterval)));
    out += fmt::format("snapshot_key = {}\nsnapshot_path = {}\non_poison = {}\n", quoted(s.snapshotKey),
                       quoted(s.snapshotPath), quoted(s.onPoison == OnPoison::kHalt ? "halt" : "quarantine"));
    out += fmt::format("subject = {}\n", quoted(SubjectTemplate::forSource(s.subject, s.subjectPrefix).text()));
    if (!s.latestStream.empty()) out += fmt::format("latest_stream = {}\n", quoted(s.latestStream));
    out += fmt::format("wake = {}\n", quoted(wakeName(s.wake)));
    out += fmt::format("duplicate_window = {}\nreplicas = {}\nmax_age = {}\n", quoted(formatDuration(s.duplicateWindow)),
                       s.replicas, quoted(formatDuration(s.maxAge)));
    if (s.settles()) {
      out += fmt::format("settle = {}\nsettle_max = {}\nsettled_stream = {}\nsettle_max_keys = {}\n",
                         quoted(formatDuration(s.settle)), quoted(formatDuration(s.settleMax)), quoted(s.settledStream),
                         s.settleMaxKeys);
    } else {
      out += "# settle is not set: no settled stream\n";
    }
  }
  for (const auto& d : c.doorbells) {
    out += fmt::format("\n[[doorbell]]\nname = {}\ndsn = {}\n", quoted(d.name), quoted(d.dsn.masked()));
  }
  return out;
}

}  // namespace outbox
