// How the replica reaches nats-server: the bridge's [nats] settings as nats.js's connection options.

import { readFileSync } from "node:fs";

import { credsAuthenticator, nkeyAuthenticator, type ConnectionOptions } from "nats";

import { ipIdentityCheck } from "./tls_identity.js";

/** How to reach nats-server: the bridge's [nats] settings. */
export interface NatsOptions {
  servers: string | string[]; // URLs, or one string of comma-separated URLs
  user?: string;
  password?: string;
  token?: string;
  credsFile?: string;
  nkeySeedFile?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsServerName?: string;
  jsDomain?: string;
}

/** nats.js's options for `o`, reconnecting for ever; the files (creds, nkey seed) read now. */
export function connectionOptions(o: NatsOptions): ConnectionOptions {
  const servers = typeof o.servers === "string" ? o.servers.split(",").map((s) => s.trim()) : o.servers;
  const opts: ConnectionOptions = {
    servers,
    name: "outbox-replica",
    maxReconnectAttempts: -1,
  };
  if (o.user) {
    opts.user = o.user;
    opts.pass = o.password ?? "";
  }
  if (o.token) opts.token = o.token;
  if (o.credsFile) opts.authenticator = credsAuthenticator(readFileSync(o.credsFile));
  if (o.nkeySeedFile) {
    opts.authenticator = nkeyAuthenticator(new TextEncoder().encode(readFileSync(o.nkeySeedFile, "utf8").trim()));
  }
  if (o.tlsCa || o.tlsCert || o.tlsServerName) {
    opts.tls = {
      ...(o.tlsCa ? { caFile: o.tlsCa } : {}),
      ...(o.tlsCert ? { certFile: o.tlsCert, keyFile: o.tlsKey } : {}),
      ...(o.tlsServerName ? { servername: o.tlsServerName } : { checkServerIdentity: ipIdentityCheck(servers) }),
    } as ConnectionOptions["tls"];
  }
  return opts;
}
