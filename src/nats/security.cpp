// nats.c's options for a login and TLS (security.h), and checkSettings (jetstream.h): the files
// loaded as a connection loads them, without connecting.
#include "nats/security.h"

#include <nats/nats.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "common/c_deleter.h"
#include "common/tls_files.h"
#include "nats/jetstream.h"
#include "nats/nkey.h"

namespace outbox::nats {

namespace {

// Signs the server's nonce with the user seed `closure` points to (natsOptions_SetNKey): the
// seed file is read by readNkeySeed alone, never by a second parser in nats.c.
natsStatus signNonce(char** customErrTxt, unsigned char** signature, int* signatureLength, const char* nonce,
                     void* closure) {
  auto signed_ = nkeySign(*static_cast<const std::string*>(closure), nonce, NkeyKind::kUser);
  if (!signed_.isOk()) {
    *customErrTxt = strdup("nats.nkey_seed_file: cannot sign the server's nonce");
    return NATS_ERR;
  }
  *signature = static_cast<unsigned char*>(malloc(signed_->size()));
  if (*signature == nullptr) return NATS_NO_MEMORY;
  memcpy(*signature, signed_->data(), signed_->size());
  *signatureLength = static_cast<int>(signed_->size());
  return NATS_OK;
}

}  // namespace

bool usesTls(const NatsConfig& o) {
  return o.url.find("tls://") != std::string::npos || !o.tlsCa.empty() || !o.tlsCert.empty() ||
         !o.tlsServerName.empty();
}

Status setSecurity(natsOptions* opts, const NatsConfig& o, std::string& seed) {
  natsStatus s = NATS_OK;
  if (!o.user.empty()) s = natsOptions_SetUserInfo(opts, o.user.c_str(), o.password.c_str());
  if (s == NATS_OK && !o.token.empty()) s = natsOptions_SetToken(opts, o.token.c_str());
  if (s != NATS_OK) return fromNats(s, 0, "nats options");
  if (!o.credsFile.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(opts, o.credsFile.c_str(), nullptr);
    if (s != NATS_OK) return fromNats(s, 0, "nats.creds_file " + o.credsFile);
  }
  if (!o.nkeySeedFile.empty()) {
    auto read = readNkeySeed(o.nkeySeedFile);
    if (!read.isOk()) return Status::permanent("nats.nkey_seed_file: " + read.status().message());
    auto publicKey = nkeyPublicKey(*read);
    if (!publicKey.isOk()) return Status::permanent(fmt::format("nats.nkey_seed_file {}: {}", o.nkeySeedFile,
                                                                publicKey.status().message()));
    seed = std::move(read).value();
    s = natsOptions_SetNKey(opts, publicKey->c_str(), &signNonce, &seed);
    if (s != NATS_OK) return fromNats(s, 0, "nats.nkey_seed_file " + o.nkeySeedFile);
  }
  if (!usesTls(o)) return Status::ok();
  if (s = natsOptions_SetSecure(opts, true); s != NATS_OK) return fromNats(s, 0, "nats TLS");
  if (!o.tlsCa.empty()) {
    s = natsOptions_LoadCATrustedCertificates(opts, o.tlsCa.c_str());
    if (s != NATS_OK) return fromNats(s, 0, "nats.tls_ca " + o.tlsCa);
  }
  if (!o.tlsCert.empty()) {
    s = natsOptions_LoadCertificatesChain(opts, o.tlsCert.c_str(), o.tlsKey.c_str());
    if (s != NATS_OK) return fromNats(s, 0, fmt::format("nats.tls_cert {} with nats.tls_key {}", o.tlsCert, o.tlsKey));
  }
  if (!o.tlsServerName.empty()) {
    s = natsOptions_SetExpectedHostname(opts, o.tlsServerName.c_str());
    if (s != NATS_OK) return fromNats(s, 0, "nats.tls_server_name");
  }
  return Status::ok();
}


namespace {

// A line that opens or closes an item of a creds file, as nats.c reads them (nats_GetJWTOrSeed):
// at least 6 characters, ending in "---", with another "---" before those.
bool isCredsHeader(std::string_view line) {
  return line.size() >= 6 && line.substr(line.size() - 3) == "---" &&
         line.substr(0, line.size() - 3).find("---") != std::string_view::npos;
}

// The items of a creds file as nats.c finds them: a line between two header lines (empty lines
// skipped); the first is the user JWT, the second the user's nkey seed.
std::vector<std::string> credsItems(const std::string& content) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < content.size();) {
    const size_t end = std::min(content.find_first_of("\r\n", at), content.size());
    if (end > at) lines.push_back(content.substr(at, end - at));
    at = end + 1;
  }
  std::vector<std::string> items;
  for (size_t i = 0; i + 2 < lines.size() && items.size() < 2; ++i) {
    if (!isCredsHeader(lines[i])) continue;
    if (isCredsHeader(lines[i + 2])) items.push_back(lines[i + 1]);
    i += 2;  // nats.c reads on after the line it compared, header or not
  }
  return items;
}

// A JWT's shape: three non-empty base64url parts, without padding.
bool looksLikeJwt(const std::string& text) {
  size_t parts = 1, partLength = 0;
  for (char c : text) {
    if (c == '.') {
      if (partLength == 0) return false;
      ++parts;
      partLength = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      ++partLength;
    } else {
      return false;
    }
  }
  return parts == 3 && partLength > 0;
}

Status checkCredsFile(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string content;
  content.resize(64 * 1024);
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad() || (!in.eof() && !in)) return Status::permanent(fmt::format("{}: cannot read the file", key));
  content.resize(static_cast<size_t>(in.gcount()));
  if (in.peek() != std::char_traits<char>::eof()) {
    return Status::permanent(fmt::format("{}: over 64 KiB, not a creds file", key));
  }
  const std::vector<std::string> items = credsItems(content);
  if (items.empty() || !looksLikeJwt(items[0])) {
    return Status::permanent(fmt::format("{}: no user JWT between '-----BEGIN NATS USER JWT-----' lines (not a creds "
                                         "file as `nsc generate creds` writes them)",
                                         key));
  }
  if (items.size() < 2) return Status::permanent(fmt::format("{}: no user nkey seed after the JWT", key));
  if (!nkeyPublicKey(items[1], NkeyKind::kUser).isOk()) {
    return Status::permanent(fmt::format("{}: the seed after the JWT is not a NATS user nkey seed (\"SU...\")", key));
  }
  return Status::ok();
}

}  // namespace

Status checkSettings(const NatsConfig& c, const std::map<std::string, std::string>& names) {
  auto name = [&](const char* key) {
    auto it = names.find(key);
    return it != names.end() ? it->second : std::string("nats.") + key;
  };
  if (!c.tlsCa.empty()) OUTBOX_RETURN_IF_ERROR(tls::checkCaFile(name("tls_ca"), c.tlsCa));
  if (!c.tlsCert.empty() || !c.tlsKey.empty()) {
    OUTBOX_RETURN_IF_ERROR(tls::checkCertificateAndKey(name("tls_cert"), c.tlsCert, name("tls_key"), c.tlsKey));
  }
  if (!c.nkeySeedFile.empty()) {
    auto seed = readNkeySeed(c.nkeySeedFile);
    if (!seed.isOk() || !nkeyPublicKey(*seed, NkeyKind::kUser).isOk()) {
      return Status::permanent(fmt::format("{}: holds no NATS user nkey seed (a word of the 58 characters of an "
                                           "\"SU...\" seed)",
                                           name("nkey_seed_file")));
    }
  }
  if (!c.credsFile.empty()) OUTBOX_RETURN_IF_ERROR(checkCredsFile(name("creds_file"), c.credsFile));
  // Then the options as connect() sets them: whatever nats.c itself refuses.
  natsOptions* raw = nullptr;
  if (natsStatus s = natsOptions_Create(&raw); s != NATS_OK) return fromNats(s, 0, "nats options");
  CHandle<natsOptions, &natsOptions_Destroy> options(raw);
  std::string seed;
  return setSecurity(options.get(), c, seed);
}

}  // namespace outbox::nats
