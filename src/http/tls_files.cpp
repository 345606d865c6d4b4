#include "http/tls_files.h"

#include "common/tls_files.h"

namespace outbox::http {

Status loadHttpTlsFiles(SSL_CTX* ctx, const HttpConfig& config) {
  return tls::loadCertificateAndKey(ctx, "http.tls_cert", config.tlsCert, "http.tls_key", config.tlsKey);
}

Status checkHttpTlsFiles(const HttpConfig& config) {
  if (config.tlsCert.empty() && config.tlsKey.empty()) return Status::ok();
  return tls::checkCertificateAndKey("http.tls_cert", config.tlsCert, "http.tls_key", config.tlsKey);
}

}  // namespace outbox::http
