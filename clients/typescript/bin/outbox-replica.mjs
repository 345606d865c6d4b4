#!/usr/bin/env node
// outbox-replica: the TypeScript consumer on the command line, with the flags, output lines and
// --dump JSON of `outbox-bridge replica` (src/cli/replica.cpp). In a checkout, run `npm ci && npm run build`
// in clients/typescript first (dist/); installed from the package, `npx outbox-replica`.
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";

import { dumpJson, MemoryStore, Replica } from "../dist/src/index.js";

const USAGE = `The reference consumer: bootstrap from a snapshot, verify it, follow the stream, print the state changes
Usage: outbox-replica.mjs [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --url TEXT REQUIRED         the bridge's base URL, e.g. http://127.0.0.1:8080
  --source TEXT:NAME REQUIRED source name
  --nats TEXT (Env:OUTBOX_BRIDGE_NATS_URL)
                              nats-server URL, or several comma-separated (default nats://127.0.0.1:4222)
  --nats-user TEXT (Env:OUTBOX_BRIDGE_NATS_USER)
  --nats-creds TEXT (Env:OUTBOX_BRIDGE_NATS_CREDS_FILE)
  --nats-nkey-seed TEXT (Env:OUTBOX_BRIDGE_NATS_NKEY_SEED_FILE)
  --nats-ca TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_CA)
  --nats-cert TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_CERT)
  --nats-key TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_KEY)
  --nats-server-name TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_SERVER_NAME)
  --nats-js-domain TEXT (Env:OUTBOX_BRIDGE_NATS_JS_DOMAIN)
                              as the same settings of the bridge's [nats] config; the password
                              and the token by OUTBOX_BRIDGE_NATS_PASSWORD / _TOKEN (or _FILE) only
  --dump TEXT:FILE            write the replica as JSON to this file after each verification and at exit
  --inbox TEXT (Env:OUTBOX_REPLICA_INBOX)
                              keep the replica and its inbox row in this MySQL/MariaDB database (a DSN
                              as a source's, mysql://USER@HOST[:PORT]/DATABASE[?ssl-mode=...&ssl-ca=...
                              &ssl-cert=...&ssl-key=...]; the password by OUTBOX_REPLICA_INBOX_PASSWORD
                              or _FILE): a restart resumes from it (default: in memory)
  --verify-interval FLOAT:SECONDS
                              seconds between checks against ?summary=true, ±20% (default 300; 0: never)
  --duration FLOAT:SECONDS    stop after this many seconds (default: run until SIGTERM)
`;

function usageError(message) {
  process.stderr.write(`${message}\nRun with --help for more information.\n`);
  process.exit(2);
}

const natsFlags = {
  "nats-user": "USER",
  "nats-creds": "CREDS_FILE",
  "nats-nkey-seed": "NKEY_SEED_FILE",
  "nats-ca": "TLS_CA",
  "nats-cert": "TLS_CERT",
  "nats-key": "TLS_KEY",
  "nats-server-name": "TLS_SERVER_NAME",
  "nats-js-domain": "JS_DOMAIN",
};
const options = {
  help: { type: "boolean", short: "h" },
  url: { type: "string" },
  source: { type: "string" },
  nats: { type: "string" },
  dump: { type: "string" },
  inbox: { type: "string" },
  "verify-interval": { type: "string" },
  duration: { type: "string" },
};
for (const flag of Object.keys(natsFlags)) options[flag] = { type: "string" };

let values;
try {
  ({ values } = parseArgs({ options, strict: true, allowPositionals: false }));
} catch (e) {
  usageError(e.message);
}
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

// Flag, else environment variable (an empty one counts as unset, as for the C++ command).
const flagOrEnv = (flag, variable) => values[flag] ?? (process.env[variable] || undefined);

if (values.url === undefined) usageError("--url is required");
if (values.source === undefined) usageError("--source is required");
if (values.url.includes("@")) {
  usageError("--url: no credentials in the URL (it is printed in messages): give http[s]://HOST[:PORT]");
}
values.url = values.url.replace(/\/$/, "");
if (!/^https?:\/\/[^/?#\s]+$/.test(values.url)) usageError(`--url: '${values.url}' must be http[s]://HOST[:PORT]`);
if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(values.source)) {
  usageError(`--source: must be a source name (^[A-Za-z_][A-Za-z0-9_]{0,63}$)`);
}
const nats = flagOrEnv("nats", "OUTBOX_BRIDGE_NATS_URL") ?? "nats://127.0.0.1:4222";
for (const url of nats.split(",").map((u) => u.replace(/\/$/, ""))) {
  if (url.includes("@")) usageError("--nats: no credentials in the URL: set user and password_file, or token_file");
  if (!/^(nats|tls):\/\/[^/?#\s]+$/.test(url)) usageError(`--nats: '${url}' must start with nats:// or tls://`);
}

function seconds(flag, fallback, min, max) {
  const text = values[flag];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value)) usageError(`--${flag}: not a number of seconds`);
  if (value < min || value > max) usageError(`--${flag}: must be a number of seconds from ${min} to ${max}`);
  return value;
}
const verifyInterval = seconds("verify-interval", 300, 0, 86400);
const duration = seconds("duration", 0, 0, 9223372036.854);

if (values.dump !== undefined) {
  const dir = dirname(values.dump);
  if (values.dump === "" || values.dump.endsWith("/")) usageError("--dump: must name a file");
  if (!existsSync(dir) || !statSync(dir).isDirectory()) usageError(`--dump: the directory '${dir}/' does not exist`);
}

// A secret from VAR, or from the file VAR_FILE names (its first line).
function secret(variable) {
  if (process.env[variable] !== undefined) return process.env[variable];
  const file = process.env[`${variable}_FILE`];
  if (file === undefined) return undefined;
  let line;
  try {
    line = readFileSync(file, "utf8").split("\n")[0].replace(/\r$/, "");
  } catch (e) {
    usageError(`replica: ${variable}_FILE: cannot read '${file}': ${e.code ?? e.message}`);
  }
  if (line === "" || line.includes("\0")) {
    usageError(`replica: ${variable}_FILE: '${file}' holds no secret on its first line, or a NUL`);
  }
  return line;
}

const natsOptions = { servers: nats };
const natsFields = {
  "nats-user": "user",
  "nats-creds": "credsFile",
  "nats-nkey-seed": "nkeySeedFile",
  "nats-ca": "tlsCa",
  "nats-cert": "tlsCert",
  "nats-key": "tlsKey",
  "nats-server-name": "tlsServerName",
  "nats-js-domain": "jsDomain",
};
for (const [flag, variable] of Object.entries(natsFlags)) {
  const value = flagOrEnv(flag, `OUTBOX_BRIDGE_NATS_${variable}`);
  if (value !== undefined && value !== "") natsOptions[natsFields[flag]] = value;
}
natsOptions.password = secret("OUTBOX_BRIDGE_NATS_PASSWORD");
natsOptions.token = secret("OUTBOX_BRIDGE_NATS_TOKEN");
const logins = [natsOptions.user, natsOptions.token, natsOptions.credsFile, natsOptions.nkeySeedFile].filter(Boolean);
if (logins.length > 1) usageError("replica: give one way to log in to nats-server (user, token, creds, nkey seed)");
if (!natsOptions.tlsCert !== !natsOptions.tlsKey) usageError("replica: --nats-cert and --nats-key go together");

function printLine(line) {
  const stamp = new Date().toISOString().slice(0, 19);
  process.stdout.write(`${stamp}Z ${line}\n`);
}

// --inbox: MysqlInbox and the records beside it (src/cli_inbox.ts), loaded only then: mysql2 is an
// optional dependency of the package.
let inbox = null;
const inboxDsn = flagOrEnv("inbox", "OUTBOX_REPLICA_INBOX");
if (inboxDsn !== undefined) {
  let cliInbox;
  try {
    cliInbox = await import("../dist/src/cli_inbox.js");
  } catch (e) {
    usageError(`--inbox: the mysql2 package cannot be loaded (npm install mysql2): ${e.message}`);
  }
  let dsn;
  try {
    dsn = cliInbox.parseMysqlDsn(inboxDsn);
  } catch (e) {
    usageError(`replica: --inbox: ${e.message}`);
  }
  if (dsn.password !== "") {
    usageError(
      "replica: --inbox: no password in the DSN (it would show in `ps`): set OUTBOX_REPLICA_INBOX_PASSWORD or " +
        "OUTBOX_REPLICA_INBOX_PASSWORD_FILE",
    );
  }
  try {
    inbox = await cliInbox.CliInbox.open(inboxDsn, secret("OUTBOX_REPLICA_INBOX_PASSWORD") ?? "", values.source);
  } catch (e) {
    usageError(`replica: --inbox: ${e.message}`);
  }
}

const memory = new MemoryStore();
const store = inbox?.store ?? memory;
let replica = null;
let dumping = Promise.resolve();
// The replica as --dump writes it; with --inbox, read back from the database (what a restart
// would resume from), row and records as of one moment.
async function dumpNow() {
  if (values.dump === undefined || replica === null) return;
  const tmp = `${values.dump}.tmp`;
  if (inbox) await inbox.writeDump(tmp);
  else writeFileSync(tmp, dumpJson(values.source, replica.inbox, memory.records(values.source)));
  renameSync(tmp, values.dump);
}
// One at a time, in the order asked.
const dump = () => (dumping = dumping.then(dumpNow));

replica = new Replica({
  url: values.url,
  source: values.source,
  nats: natsOptions,
  store,
  verifyIntervalMs: verifyInterval * 1000,
  report: (line) => {
    printLine(line);
    if (!line.includes("] verified at version")) return;
    dump().catch((e) => printLine(`[${values.source}] --dump: ${e.message}`));
  },
});

const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => stop.abort());
// setTimeout takes at most 2^31 - 1 ms: a longer --duration is waited for in steps.
let timer = null;
const stopAt = Date.now() + duration * 1000;
const arm = () => {
  timer = setTimeout(() => (Date.now() >= stopAt ? stop.abort() : arm()), Math.min(stopAt - Date.now(), 2 ** 31 - 1));
};
if (duration > 0) arm();
if (inbox) {
  // Until the tables exist, nothing can be resumed or applied: a database that cannot be reached
  // yet is retried, as nats-server is.
  for (let delay = 200; !stop.signal.aborted; delay = Math.min(delay * 2, 10_000)) {
    try {
      await inbox.createTables();
      break;
    } catch (e) {
      printLine(`[${values.source}] the inbox's tables: ${e.message}; retrying in ${delay} ms`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
await replica.run(stop.signal);
clearTimeout(timer);
await dumping.catch(() => undefined);
// Always: a re-bootstrap at the version last dumped (a checksum that differed there) changed the
// records, and a dump skipped then kept the ones the source no longer has.
try {
  await dump();
} catch (e) {
  printLine(`[${values.source}] the last --dump was not written: ${e.message}`);
}
const row = replica.inbox;
printLine(
  `[${values.source}] stopped at version ${replica.appliedVersion} (${row?.recordCount ?? 0} records, checksum ` +
    `verified at version ${replica.lastVerifiedVersion})`,
);
await replica.close();
await inbox?.close();
process.exit(0);
