#pragma once

// The login's first step, decided before any secret leaves the process (issue 24, 1).
//
// libmariadb 3.3 falls back to plain text when a server offers no TLS unless it verifies the
// server's certificate and name, and uses whichever authentication plugin the server names,
// mysql_clear_password (the password as it is) included. So every connection over TCP or a socket
// starts with one of our own client plugins, which the library calls after reading the server's
// greeting and before it writes the handshake response:
//   - ssl-mode REQUIRED and stronger: a server that offers no TLS is refused there (no login
//     packet is sent); with TLS the handshake response goes out encrypted and the server's own
//     plugin follows, any plugin.
//   - PREFERRED: without TLS only plugins that never send the password as it is may follow
//     (kPlainTextPlugins); with TLS any.
//   - DISABLED: no guard; the same plain-text list from the start.
// A server too old to name plugins (no CLIENT_PLUGIN_AUTH) gets mysql_native_password, which
// PREFERRED and DISABLED allow and the stronger modes refuse before sending it.

#include "config/config.h"

typedef struct st_mysql MYSQL;

namespace outbox::db {

// Plugins that keep the password from a passive listener on a plain connection (a scramble, a
// signature, Kerberos, or the password encrypted to the server's RSA key). Not mysql_clear_password
// or dialog (PAM), which send it as it is.
inline constexpr const char* kPlainTextPlugins =
    "mysql_native_password,client_ed25519,caching_sha2_password,sha256_password,auth_gssapi_client";

// Registers the guard plugins with the library (once; setAuthPolicy calls it too).
void registerAuthGuards();

// Sets `mysql`'s first plugin and the plugins allowed for `mode`; before mysql_real_connect.
// Thread-safe.
void setAuthPolicy(MYSQL* mysql, SslMode mode);

}  // namespace outbox::db
