// `check-config`'s rendering of a config, secrets masked: TOML that parses back to the same config.
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

std::string renderMasked(const Config& c) {
  using namespace config_detail;
  std::string out = "[log]\n" + writeKeys(logKeys(), c);
  out += "\n[nats]\n" + writeKeys(natsKeys(), c.nats);
  out += "\n[http]\n" + writeKeys(httpKeys(), c.http);
  out += "\n[lease]\n" + writeKeys(leaseKeys(), c.lease);
  out += "\n[database]\n" + writeKeys(databaseKeys(), c.database);
  for (const auto& s : c.sources) out += "\n[[source]]\n" + writeKeys(sourceKeys(), s);
  for (const auto& d : c.doorbells) out += "\n[[doorbell]]\n" + writeKeys(doorbellKeys(), d);
  return out;
}

}  // namespace outbox
