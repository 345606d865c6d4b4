// The CLI through TLS with a client certificate, a user nkey and a server name, as the C++
// replica's nats_tls test does: a nats-server of this test's own that requires all three, the
// certificates made by openssl, the key pair by nats.js's nkeys.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { accessSync, chmodSync, constants, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { nkeys } from "nats";

import { AccountsSource, clientRoot, freePort, Process, registerSecret, suffix, tmp, until } from "./support.js";

const base = join(tmp, `ts-nats-tls-${suffix()}`);
const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

function openssl(...args: string[]): void {
  execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
}

// <base>-<name>.pem and -<name>-key.pem, signed by <base>-ca.pem, for 127.0.0.1 and nats.internal.
function certificate(name: string): void {
  const out = `${base}-${name}`;
  openssl("req", ...EC, "-subj", "/CN=test", "-keyout", `${out}-key.pem`, "-out", `${out}.csr`);
  writeFileSync(`${out}.ext`, "subjectAltName=IP:127.0.0.1,DNS:nats.internal\n");
  openssl("x509", "-req", "-in", `${out}.csr`, "-CA", `${base}-ca.pem`, "-CAkey", `${base}-ca-key.pem`, "-set_serial",
    "0x" + suffix(), "-days", "1", "-extfile", `${out}.ext`, "-out", `${out}.pem`);
}

// Debian installs nats-server in /usr/sbin, which a user's PATH may lack.
function natsServerBinary(): string {
  try {
    accessSync("/usr/sbin/nats-server", constants.X_OK);
    return "/usr/sbin/nats-server";
  } catch {
    return "nats-server";
  }
}

let server: Process;
let url = "";
let seed = "";
let source: AccountsSource;

before(async () => {
  openssl("req", "-x509", ...EC, "-days", "1", "-subj", `/CN=test CA ${suffix()}`, "-keyout", `${base}-ca-key.pem`,
    "-out", `${base}-ca.pem`);
  certificate("server");
  certificate("client");
  const user = nkeys.createUser();
  seed = new TextDecoder().decode(user.getSeed());
  registerSecret(seed);
  writeFileSync(`${base}-user.nk`, seed + "\n");
  chmodSync(`${base}-user.nk`, 0o600);
  const port = await freePort();
  const monitor = await freePort();
  writeFileSync(
    `${base}-nats.conf`,
    `listen: 127.0.0.1:${port}\nhttp: 127.0.0.1:${monitor}\njetstream { store_dir: "${base}-js" }\n` +
      `tls {\n  cert_file: "${base}-server.pem"\n  key_file: "${base}-server-key.pem"\n  ca_file: "${base}-ca.pem"\n` +
      `  verify: true\n  timeout: 2\n}\nauthorization { users: [ { nkey: "${user.getPublicKey()}" } ] }\n`,
  );
  server = new Process([natsServerBinary(), "-c", `${base}-nats.conf`], `${base}-nats.log`);
  await until(
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${monitor}/healthz?js-enabled-only=true`)).status === 200;
      } catch {
        return false;
      }
    },
    20_000,
    "the TLS nats-server",
  );
  url = `tls://127.0.0.1:${port}`;
  source = await AccountsSource.create(
    `[nats]\nurl = "${url}"\ntls_ca = "${base}-ca.pem"\ntls_cert = "${base}-client.pem"\n` +
      `tls_key = "${base}-client-key.pem"\nnkey_seed_file = "${base}-user.nk"\ntls_server_name = "nats.internal"\n`,
  );
});

after(async () => {
  await source?.close();
  await server?.stop();
});

/** The CLI with every TLS and nkey flag, expecting the server's certificate to carry `serverName`. */
function tlsReplica(serverName: string, log: string, more: string[] = []): Process {
  return new Process(
    [
      process.execPath,
      join(clientRoot, "bin", "outbox-replica.mjs"),
      "--url",
      source.url,
      "--source",
      source.name,
      "--nats",
      url,
      "--nats-ca",
      `${base}-ca.pem`,
      "--nats-cert",
      `${base}-client.pem`,
      "--nats-key",
      `${base}-client-key.pem`,
      "--nats-nkey-seed",
      `${base}-user.nk`,
      "--nats-server-name",
      serverName,
      ...more,
    ],
    log,
  );
}

test("the CLI goes through TLS with a client certificate, an nkey and a server name", async () => {
  await source.seed(20);
  await source.startBridge();
  await source.drained();
  const log = join(tmp, `ts-tls-replica-${suffix()}.log`);
  const replica = tlsReplica("nats.internal", log, ["--verify-interval", "0.1"]);
  try {
    await until(() => replica.log().includes("] verified at version 20: 20 records"), 20_000, replica.log());
    await source.change(21, "through TLS");
    await until(() => replica.log().includes("] verified at version 21: 21 records"), 20_000, replica.log());
  } finally {
    assert.equal(await replica.stop(), 0, replica.log());
  }
  assert.ok(!replica.log().includes(seed));
});

test("a name the server's certificate does not carry is refused, and the replica keeps trying, saying why", async () => {
  const log = join(tmp, `ts-tls-wrong-${suffix()}.log`);
  const replica = tlsReplica("other.internal", log);
  try {
    await until(() => /retrying in/.test(replica.log()), 20_000, replica.log());
    assert.match(replica.log(), /other\.internal/);
    assert.doesNotMatch(replica.log(), /bootstrapped:/);
  } finally {
    assert.equal(await replica.stop(), 0, replica.log());
  }
});

// Decentralised auth: an operator, an account with JetStream and a user JWT signed by the account,
// made here with nats.js's nkeys, and the user's creds file as `nsc` writes it.
const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString("base64url");

function jwt(issuer: ReturnType<typeof nkeys.createOperator>, subject: string, name: string, nats: object): string {
  const header = b64url(JSON.stringify({ typ: "JWT", alg: "ed25519-nkey" }));
  const claims = b64url(
    JSON.stringify({
      jti: nkeys.createUser().getPublicKey(),
      iat: Math.floor(Date.now() / 1000),
      iss: issuer.getPublicKey(),
      name,
      sub: subject,
      nats,
    }),
  );
  return `${header}.${claims}.${b64url(issuer.sign(new TextEncoder().encode(`${header}.${claims}`)))}`;
}

test("the CLI logs in with a creds file of an operator-signed account", async () => {
  const operator = nkeys.createOperator();
  const account = nkeys.createAccount();
  const system = nkeys.createAccount(); // JetStream needs a system account
  const limits = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
  const operatorJwt = jwt(operator, operator.getPublicKey(), "test-operator", { type: "operator", version: 2 });
  const accountJwt = jwt(operator, account.getPublicKey(), "test-account", {
    limits: { ...limits, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 },
    default_permissions: { pub: {}, sub: {} },
    type: "account",
    version: 2,
  });
  const systemJwt = jwt(operator, system.getPublicKey(), "SYS", { limits, type: "account", version: 2 });
  const port = await freePort();
  const monitor = await freePort();
  const opBase = `${base}-op`;
  writeFileSync(
    `${opBase}.conf`,
    `listen: 127.0.0.1:${port}\nhttp: 127.0.0.1:${monitor}\noperator: "${operatorJwt}"\n` +
      `system_account: ${system.getPublicKey()}\nresolver: MEMORY\nresolver_preload: {\n` +
      `  ${account.getPublicKey()}: "${accountJwt}"\n  ${system.getPublicKey()}: "${systemJwt}"\n}\n` +
      `jetstream { store_dir: "${opBase}-js" }\n`,
  );
  const credsFor = (name: string) => {
    const user = nkeys.createUser();
    const seed = new TextDecoder().decode(user.getSeed());
    registerSecret(seed);
    const userJwt = jwt(account, user.getPublicKey(), name, {
      pub: {},
      sub: {},
      subs: -1,
      data: -1,
      payload: -1,
      type: "user",
      version: 2,
    });
    const path = `${opBase}-${name}.creds`;
    writeFileSync(
      path,
      `-----BEGIN NATS USER JWT-----\n${userJwt}\n------END NATS USER JWT------\n\n` +
        "************************* IMPORTANT *************************\n" +
        "NKEY Seed printed below can be used to sign and prove identity.\n\n" +
        `-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`,
      { mode: 0o600 },
    );
    return path;
  };
  const opServer = new Process([natsServerBinary(), "-c", `${opBase}.conf`], `${opBase}.log`);
  const opSource = await AccountsSource.create(
    `[nats]\nurl = "nats://127.0.0.1:${port}"\ncreds_file = "${credsFor("bridge")}"\n`,
  );
  const log = join(tmp, `ts-creds-replica-${suffix()}.log`);
  let replica: Process | null = null;
  try {
    await opSource.seed(10);
    await opSource.startBridge();
    await opSource.drained();
    replica = new Process(
      [
        process.execPath,
        join(clientRoot, "bin", "outbox-replica.mjs"),
        "--url",
        opSource.url,
        "--source",
        opSource.name,
        "--nats",
        `nats://127.0.0.1:${port}`,
        "--nats-creds",
        credsFor("replica"),
        "--verify-interval",
        "0.1",
      ],
      log,
    );
    const r = replica;
    await until(() => r.log().includes("] verified at version 10: 10 records"), 20_000, r.log());
  } finally {
    if (replica) assert.equal(await replica.stop(), 0, replica.log());
    await opSource.close();
    await opServer.stop();
  }
});
