#pragma once

// The HTTPS listener's certificate and key (http.tls_cert, http.tls_key), loaded with the OpenSSL
// calls the listener's context needs (common/tls_files.h): the chain, the key without a
// passphrase (never a prompt), the key the certificate's. check-config and the start of `run`
// check them; the listener's context can load them with loadHttpTlsFiles, so both agree.

#include "common/status.h"
#include "config/config.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace outbox::http {

// Loads http.tls_cert and http.tls_key into `ctx` (e.g. an asio::ssl::context's native_handle());
// a permanent error naming the key and why.
Status loadHttpTlsFiles(SSL_CTX* ctx, const HttpConfig& config);

// The same into a context thrown away; ok when HTTPS is not configured.
Status checkHttpTlsFiles(const HttpConfig& config);

}  // namespace outbox::http
