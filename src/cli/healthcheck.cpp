// outbox-bridge healthcheck: GET /readyz (or another path) of a running bridge; exit 0 when it
// answers 200. For container HEALTHCHECKs, where the image has no curl.

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <httplib.h>

#include "cli/cli.h"
#include "http/server.h"

namespace outbox::cli {

Command addHealthcheckOptions(CLI::App* cmd) {
  struct Args {
    std::string config, url, path = "/readyz";
    double timeout = 3;
  };
  auto args = std::make_shared<Args>();
  // --config and --url exclude each other (exit 2: which address would be asked is not guessed);
  // $OUTBOX_BRIDGE_CONFIG, which an image or unit may set for every command, is read only without
  // --url.
  auto* config = cmd->add_option("--config", args->config,
                                 fmt::format("TOML config file: ask its http.listen (or metrics_listen); without "
                                             "--config or --url, ${} names it. Not with --url",
                                             kConfigEnvironmentVariable));
  auto* url = cmd->add_option("--url", args->url,
                  fmt::format("base URL to ask instead, e.g. http://127.0.0.1:8080 (then no config is read, not even "
                              "${}). Not with --config",
                              kConfigEnvironmentVariable));
  cmd->add_option("--path", args->path, "path to ask (default /readyz; /healthz for liveness)")
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            const bool plain = std::all_of(path.begin(), path.end(), [](unsigned char c) { return c > 32 && c < 127; });
            return !path.empty() && path.front() == '/' && plain ? ""
                                                                 : "must be a path starting with '/' (e.g. /readyz)";
          },
          "PATH"));
  cmd->add_option("--timeout", args->timeout, "seconds to wait for the answer (default 3)")
      ->check(secondsBetween(0.001, 3600));
  return [args, config, url]() {
    if (config->count() > 0 && url->count() > 0) {
      throw Exit{kExitUsage, "healthcheck: give --url or --config, not both (keep --url to ask that address and read "
                             "no config; keep --config to ask the config's http.listen or metrics_listen)"};
    }
    std::string base = args->url;
    if (!base.empty()) requireBaseUrl("--url", base);
    const bool fromConfig = base.empty();
    if (fromConfig) {
      if (args->config.empty()) {
        const char* fromEnvironment = std::getenv(kConfigEnvironmentVariable);
        if (fromEnvironment != nullptr) args->config = fromEnvironment;
      }
      if (args->config.empty()) {
        throw Exit{kExitUsage, "healthcheck: give --config (or $OUTBOX_BRIDGE_CONFIG) or --url"};
      }
      Config config = loadOrExit(args->config, "healthcheck");
      // The health routes are on http.metrics_listen when it is set, else on http.listen (HTTPS
      // with http.tls_cert).
      const bool separate = !config.http.metricsListen.empty();
      const std::string& listen = separate ? config.http.metricsListen : config.http.listen;
      const char* key = separate ? "http.metrics_listen" : "http.listen";
      std::string host;
      int port = 0;
      if (!splitListen(listen, host, port) || port == 0) {
        throw Exit{kExitUsage, fmt::format("healthcheck: {} '{}' names no fixed port; use --url", key, listen)};
      }
      // A wildcard listener is asked on loopback.
      if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
      if (host == "::") host = "::1";
      base = fmt::format("{}://{}:{}", !separate && !config.http.tlsCert.empty() ? "https" : "http",
                         host.find(':') != std::string::npos ? "[" + host + "]" : host, port);
    }
    httplib::Client client(base);
    // Asked on loopback, the bridge's certificate names its public host, not this address.
    if (fromConfig) client.enable_server_certificate_verification(false);
    auto timeout = std::chrono::milliseconds(static_cast<int64_t>(args->timeout * 1000));
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    auto res = client.Get(args->path);
    if (!res) {
      std::fprintf(stderr, "healthcheck: GET %s%s: %s\n", base.c_str(), args->path.c_str(),
                   httplib::to_string(res.error()).c_str());
      return kExitFailure;
    }
    std::fprintf(res->status == 200 ? stdout : stderr, "%d %s\n", res->status, res->body.c_str());
    return res->status == 200 ? kExitOk : kExitFailure;
  };
}

}  // namespace outbox::cli
