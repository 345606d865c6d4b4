// nats.js (2.29) starts TLS without a server name when a server is given by IP address
// (tls://127.0.0.1:4222), and Node then checks the certificate against "localhost": a
// certificate for the address itself is refused, where `outbox-bridge replica` (nats.c) and the
// bridge accept it. Without --nats-server-name, the check here also accepts a certificate that
// names one of the IP addresses the servers were given by.

import { isIP } from "node:net";
import { checkServerIdentity, type PeerCertificate } from "node:tls";

/** The check for servers given as URLs, or undefined when none is given by IP address. */
export function ipIdentityCheck(
  servers: readonly string[],
): ((host: string, cert: PeerCertificate) => Error | undefined) | undefined {
  const ips: string[] = [];
  for (const server of servers) {
    let host: string;
    try {
      host = new URL(server.includes("://") ? server : `nats://${server}`).hostname.replace(/^\[|\]$/g, "");
    } catch {
      continue;
    }
    if (isIP(host)) ips.push(host);
  }
  if (ips.length === 0) return undefined;
  return (host, cert) => {
    const refused = checkServerIdentity(host, cert);
    if (refused === undefined || ips.some((ip) => checkServerIdentity(ip, cert) === undefined)) return undefined;
    return refused;
  };
}
