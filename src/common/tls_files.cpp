#include "common/tls_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fmt/format.h>

#include "common/c_deleter.h"

namespace outbox::tls {

namespace {

using Context = CHandle<SSL_CTX, &SSL_CTX_free>;

// OpenSSL's reason for the last error of this thread ("no start line", "key values mismatch"),
// then the queue cleared. Reasons are fixed texts: they never hold the file's bytes.
std::string lastReason() {
  unsigned long code = 0, last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  const char* reason = last != 0 ? ERR_reason_error_string(last) : nullptr;
  return reason != nullptr ? reason : "unknown error";
}

// A path as a message may show it (config's shownValue, which common/ does not reach): control
// characters as \xNN, at most 100 bytes.
std::string shownValue(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size() && i < 100; ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    out += c < 32 || c == 127 ? fmt::format("\\x{:02x}", c) : std::string(1, path[i]);
  }
  return path.size() > 100 ? out + fmt::format("... ({} bytes)", path.size()) : out;
}

// The password callback: no passphrase, so an encrypted key fails instead of asking a terminal.
int noPassphrase(char*, int, int, void*) { return 0; }

Status refused(const std::string& key, const std::string& path, const std::string& what,
               const std::string& reason = lastReason()) {
  return Status::permanent(fmt::format("{}: '{}' {} (OpenSSL: {})", key, shownValue(path), what, reason));
}

Context newContext() {
  Context ctx(SSL_CTX_new(TLS_method()));
  if (ctx) SSL_CTX_set_default_passwd_cb(ctx.get(), &noPassphrase);
  return ctx;
}

}  // namespace

Status loadCertificateAndKey(SSL_CTX* ctx, const std::string& certKey, const std::string& cert,
                             const std::string& keyKey, const std::string& key) {
  ERR_clear_error();
  SSL_CTX_set_default_passwd_cb(ctx, &noPassphrase);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    return refused(certKey, cert, "is not a PEM certificate chain");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string reason = lastReason();
    if (reason.find("mismatch") != std::string::npos) {
      return Status::permanent(fmt::format("{}: '{}' is not the private key of {} '{}'", keyKey, shownValue(key),
                                           certKey, shownValue(cert)));
    }
    return refused(keyKey, key, "is not a PEM private key without a passphrase", reason);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return Status::permanent(fmt::format("{}: '{}' is not the private key of {} '{}'", keyKey, shownValue(key), certKey,
                                         shownValue(cert)));
  }
  return Status::ok();
}

Status checkCertificateAndKey(const std::string& certKey, const std::string& cert, const std::string& keyKey,
                              const std::string& key) {
  Context ctx = newContext();
  if (!ctx) return Status::fatal("OpenSSL: cannot make a TLS context");
  return loadCertificateAndKey(ctx.get(), certKey, cert, keyKey, key);
}

Status checkCaFile(const std::string& caKey, const std::string& path) {
  Context ctx = newContext();
  if (!ctx) return Status::fatal("OpenSSL: cannot make a TLS context");
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(ctx.get(), path.c_str(), nullptr) != 1) {
    return refused(caKey, path, "holds no PEM CA certificate");
  }
  // A file of CRLs only loads too, and trusts nothing.
  X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(store);
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    if (X509_OBJECT_get_type(sk_X509_OBJECT_value(objects, i)) == X509_LU_X509) return Status::ok();
  }
  return Status::permanent(fmt::format("{}: '{}' holds no PEM CA certificate", caKey, shownValue(path)));
}

}  // namespace outbox::tls
