#include "db/auth_guard.h"

#include <mysql.h>
#include <errmsg.h>
#include <mysql/plugin_auth.h>

#include <cstdarg>
#include <string>

// <mysql/client_plugin.h> as Debian ships it includes <ma_compress.h>, which no package holds: the
// client plugin ABI (interface 0x0100, unchanged since MySQL 5.5) is declared here as it is there.
extern "C" {
struct st_mysql_client_plugin;
struct st_mysql_client_plugin* mysql_client_register_plugin(MYSQL* mysql, struct st_mysql_client_plugin* plugin);
}

namespace outbox::db {

namespace {

constexpr int kAuthenticationPlugin = 2;              // MYSQL_CLIENT_AUTHENTICATION_PLUGIN
constexpr unsigned kAuthenticationInterface = 0x0100;  // ..._AUTHENTICATION_PLUGIN_INTERFACE_VERSION

struct AuthenticationPlugin {  // st_mysql_client_plugin_AUTHENTICATION
  int type;
  unsigned int interface_version;
  const char* name;
  const char* author;
  const char* desc;
  unsigned int version[3];
  const char* license;
  void* mysql_api;
  int (*init)(char*, size_t, int, va_list);
  int (*deinit)(void);
  int (*options)(const char* option, const void*);
  int (*authenticate_user)(MYSQL_PLUGIN_VIO* vio, MYSQL* mysql);
};

constexpr const char* kGuardRequired = "outbox_tls_required";
constexpr const char* kGuardPreferred = "outbox_tls_preferred";

bool tlsOffered(MYSQL* mysql) { return (mysql->server_capabilities & CLIENT_SSL) != 0; }

// Sends the handshake response with no authentication data: the library starts TLS first when the
// server offers it (we asked for it with MYSQL_OPT_SSL_ENFORCE), and the server, which does not
// know this plugin, answers with a switch to the account's plugin.
int sendEmptyResponse(MYSQL_PLUGIN_VIO* vio) {
  static const unsigned char kNothing[1] = {0};
  return vio->write_packet(vio, kNothing, 0) != 0 ? CR_ERROR : CR_OK;
}

int guardRequired(MYSQL_PLUGIN_VIO* vio, MYSQL* mysql) {
  if (!tlsOffered(mysql)) {
    SET_CLIENT_ERROR(mysql, CR_SSL_CONNECTION_ERROR, "HY000",
                     "the server offers no TLS: refused before logging in (ssl-mode requires TLS)");
    return CR_ERROR;
  }
  mysql_optionsv(mysql, MARIADB_OPT_RESTRICTED_AUTH, nullptr);  // encrypted from here: any plugin
  return sendEmptyResponse(vio);
}

int guardPreferred(MYSQL_PLUGIN_VIO* vio, MYSQL* mysql) {
  if (tlsOffered(mysql)) mysql_optionsv(mysql, MARIADB_OPT_RESTRICTED_AUTH, nullptr);
  return sendEmptyResponse(vio);
}

AuthenticationPlugin makeGuard(const char* name, int (*authenticate)(MYSQL_PLUGIN_VIO*, MYSQL*)) {
  AuthenticationPlugin p{};
  p.type = kAuthenticationPlugin;
  p.interface_version = kAuthenticationInterface;
  p.name = name;
  p.author = "outbox-bridge";
  p.desc = "refuses a login whose secret would leave unencrypted";
  p.version[0] = 1;
  p.license = "internal";
  p.authenticate_user = authenticate;
  return p;
}

AuthenticationPlugin guardRequiredPlugin = makeGuard(kGuardRequired, guardRequired);
AuthenticationPlugin guardPreferredPlugin = makeGuard(kGuardPreferred, guardPreferred);

}  // namespace

void registerAuthGuards() {
  static const bool registered = [] {
    MYSQL* mysql = mysql_init(nullptr);
    if (mysql == nullptr) return false;
    mysql_client_register_plugin(mysql, reinterpret_cast<st_mysql_client_plugin*>(&guardRequiredPlugin));
    mysql_client_register_plugin(mysql, reinterpret_cast<st_mysql_client_plugin*>(&guardPreferredPlugin));
    mysql_close(mysql);
    return true;
  }();
  (void)registered;
}

void setAuthPolicy(MYSQL* mysql, SslMode mode) {
  registerAuthGuards();
  if (mode == SslMode::kDisabled) {
    mysql_optionsv(mysql, MARIADB_OPT_RESTRICTED_AUTH, kPlainTextPlugins);
    return;
  }
  const bool required = mode >= SslMode::kRequired;
  const char* guard = required ? kGuardRequired : kGuardPreferred;
  mysql_optionsv(mysql, MYSQL_DEFAULT_AUTH, guard);
  // Until the guard has seen TLS: the guard itself, and for PREFERRED the plain-text list.
  const std::string allowed = required ? std::string(guard) : std::string(guard) + "," + kPlainTextPlugins;
  mysql_optionsv(mysql, MARIADB_OPT_RESTRICTED_AUTH, allowed.c_str());
}

}  // namespace outbox::db
