#pragma once

// PEM files for TLS, loaded with OpenSSL as the bridge's clients and server load them (nats.c,
// the MySQL client library and the HTTPS listener all use OpenSSL's SSL_CTX calls), so that
// check-config and the start of `run` refuse a file that a connection would refuse later (and
// `run` would retry for ever). Never prompts: an encrypted key is refused (no passphrase is taken).

#include <string>

#include "common/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace outbox::tls {

// Loads the certificate chain `cert` and its private key `key` into `ctx` and checks that the
// key is the certificate's. A permanent error names `certKey` or `keyKey` (the setting: e.g.
// "http.tls_cert") and why, the path cut and escaped; no error text ever holds key material.
Status loadCertificateAndKey(SSL_CTX* ctx, const std::string& certKey, const std::string& cert,
                             const std::string& keyKey, const std::string& key);

// The same into a context of its own, thrown away: whether they load.
Status checkCertificateAndKey(const std::string& certKey, const std::string& cert, const std::string& keyKey,
                              const std::string& key);

// Whether `path` holds at least one PEM certificate that can be trusted as a CA (as
// SSL_CTX_load_verify_locations reads it); a permanent error naming `caKey` otherwise.
Status checkCaFile(const std::string& caKey, const std::string& path);

}  // namespace outbox::tls
