// The package as a team gets it from a registry: `npm pack` of a copy of this directory (as a
// clean checkout has it: no dist/, the repository's LICENSE two levels up), the tarball installed
// into an empty project with its peer dependencies, and a consumer there that imports it — as an
// ES module, from CommonJS by import(), its command, and its types under TypeScript's NodeNext —
// and README's producer examples (mysql2, TypeORM, Knex) run from there against the stack.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import mysql from "mysql2/promise";

import { Checksum } from "../src/index.js";
import { clientRoot, mysqlOptions, outboxSchema, repoRoot, suffix } from "./support.js";

const work = mkdtempSync(join(tmpdir(), "outbox-pack-"));
const app = join(work, "app");
const packageJson = JSON.parse(readFileSync(join(clientRoot, "package.json"), "utf8")) as {
  name: string;
  version: string;
  peerDependencies: Record<string, string>;
};
/** The version of `name` this directory's lock file installs. */
function locked(name: string): string {
  const lock = JSON.parse(readFileSync(join(clientRoot, "package-lock.json"), "utf8"));
  return (lock as { packages: Record<string, { version: string }> }).packages[`node_modules/${name}`].version;
}
let tarball = "";

/** Runs `command` in `cwd`; its output, or an error holding it. npm's own variables stay out (under `npm test`). */
function run(cwd: string, command: string, args: string[], extraEnv: Record<string, string> = {}): string {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
  try {
    return execFileSync(command, args, {
      cwd,
      env: { ...env, npm_config_update_notifier: "false", ...extraEnv },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 300_000,
    });
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${command} ${args.join(" ")} in ${cwd}: ${err.message}\n${err.stdout ?? ""}\n${err.stderr ?? ""}`);
  }
}

before(() => {
  // The package's directory as a checkout holds it, beside the LICENSE its prepack copies in.
  const pkg = join(work, "repo", "clients", "typescript");
  mkdirSync(pkg, { recursive: true });
  cpSync(join(repoRoot, "LICENSE"), join(work, "repo", "LICENSE"));
  for (const f of [".gitignore", "package.json", "package-lock.json", "tsconfig.json", "README.md", "src", "bin"]) {
    cpSync(join(clientRoot, f), join(pkg, f), { recursive: true });
  }
  symlinkSync(join(clientRoot, "node_modules"), join(pkg, "node_modules"), "dir");
  const out = join(work, "out");
  mkdirSync(out);
  run(pkg, "npm", ["pack", "--pack-destination", out]);
  const packed = readdirSync(out).filter((f) => f.endsWith(".tgz"));
  assert.deepEqual(packed, [`${packageJson.name}-${packageJson.version}.tgz`]);
  tarball = join(out, packed[0]);

  // An empty project: the tarball, its peers (nats; mysql2, optional, for MysqlInbox) at the
  // versions this directory locks, and what its TypeScript users have.
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  run(app, "npm", [
    "install",
    "--prefer-offline",
    "--no-audit",
    "--no-fund",
    tarball,
    `nats@${locked("nats")}`,
    `mysql2@${locked("mysql2")}`,
    `@types/node@${locked("@types/node")}`,
    `typeorm@${locked("typeorm")}`,
    `knex@${locked("knex")}`,
  ]);
});

after(() => {
  rmSync(work, { recursive: true, force: true });
});

test("the tarball holds the build, the command, README and LICENSE, and no tests or sources", () => {
  const files = run(work, "tar", ["-tzf", tarball])
    .split("\n")
    .filter((f) => f !== "")
    .map((f) => f.replace(/^package\//, ""));
  const wanted = ["package.json", "README.md", "LICENSE", "bin/outbox-replica.mjs", "dist/src/index.js", "dist/src/index.d.ts"];
  for (const f of wanted) {
    assert.ok(files.includes(f), `${f} is in the tarball: ${files.join(" ")}`);
  }
  assert.deepEqual(
    files.filter((f) => f.startsWith("dist/test/") || f.startsWith("src/") || f.startsWith("test/")),
    [],
    "no tests or TypeScript sources",
  );
  const installed = join(app, "node_modules", packageJson.name);
  assert.equal(readFileSync(join(installed, "LICENSE"), "utf8"), readFileSync(join(repoRoot, "LICENSE"), "utf8"));
  const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
  assert.equal(manifest.private, undefined);
  assert.equal(manifest.license, "Apache-2.0");
  assert.deepEqual(manifest.dependencies, undefined, "nats and mysql2 are the application's, as peers");
  assert.deepEqual(manifest.peerDependencies, packageJson.peerDependencies);
});

test("a consumer in the empty project imports it and computes checksums and a replica dump", () => {
  const vectors = join(repoRoot, "tests", "vectors", "checksum_vectors.json");
  writeFileSync(
    join(app, "consumer.mjs"),
    `import { readFileSync } from "node:fs";
import { Checksum, dumpJson, MemoryStore, Replica } from "${packageJson.name}";

const sums = {};
for (const [name, set] of Object.entries(JSON.parse(readFileSync(process.argv[2], "utf8")).sets)) {
  const sum = new Checksum();
  for (const record of set.records) sum.add(record);
  sums[name] = sum.toString();
}
const store = new MemoryStore();
const header = { epoch: 1, watermark: 2, streamName: "CONTROL_ACCOUNT", streamSeq: 2, key: "id" };
const writing = await store.beginBootstrap("account", header);
await writing.records(["id", "displayName"], [{ key: "1", values: ["1", "Acme"] }, { key: "2", values: ["2", null] }]);
const sum = new Checksum();
sum.add(["1", "Acme"]);
sum.add(["2", null]);
const row = await writing.commit({ ...header, appliedVersion: 2, columns: ["id", "displayName"], numeric: [true, false],
  sum: BigInt("0x" + sum.toString().slice("sha256-sum64:".length)), recordCount: 2, generation: 0 });
const replica = new Replica({ url: "http://127.0.0.1:9", source: "account", nats: { servers: "nats://127.0.0.1:9" }, store });
console.log(JSON.stringify({ sums, dump: dumpJson("account", row, store.records("account")), applied: replica.appliedVersion }));
`,
  );
  const out = JSON.parse(run(app, process.execPath, ["consumer.mjs", vectors]));
  const expected = JSON.parse(readFileSync(vectors, "utf8")).sets as Record<string, { checksum: string }>;
  assert.ok(Object.keys(expected).length >= 5);
  for (const [name, set] of Object.entries(expected)) assert.equal(out.sums[name], set.checksum, name);
  const sum = new Checksum();
  sum.add(["1", "Acme"]);
  sum.add(["2", null]);
  assert.equal(
    out.dump,
    `{"source":"account","sourceEpoch":1,"appliedVersion":2,"key":"id",` +
      `"records":[{"id":1,"displayName":"Acme"},{"id":2,"displayName":null}],"recordCount":2,"checksum":"${sum}"}`,
  );
  assert.equal(out.applied, 0, "a Replica is made without connecting");
});

test("README's CommonJS provider loads it; its command runs; its types check under NodeNext", () => {
  // A CommonJS NestJS app's provider, as README shows it, compiled as such an app compiles.
  const readme = readFileSync(join(clientRoot, "README.md"), "utf8");
  const provider = /```ts\n(\/\/ replica\.provider\.ts[^]*?)```/.exec(readme);
  assert.ok(provider, "README shows replica.provider.ts");
  const nest = join(app, "nest");
  mkdirSync(nest);
  writeFileSync(join(nest, "package.json"), JSON.stringify({ type: "commonjs" }));
  writeFileSync(join(nest, "replica.provider.ts"), provider[1]);
  writeFileSync(
    join(nest, "main.ts"),
    `import { replicaProvider } from "./replica.provider";
replicaProvider.useFactory().then((r) => console.log(r.constructor.name, r.appliedVersion));
`,
  );
  const compilerOptions = { module: "commonjs", moduleResolution: "node", target: "ES2022", strict: true, outDir: "out" };
  writeFileSync(join(nest, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["*.ts"] }));
  run(nest, process.execPath, [join(clientRoot, "node_modules", "typescript", "bin", "tsc"), "-p", "."]);
  assert.match(readFileSync(join(nest, "out", "main.js"), "utf8"), /require\("\.\/replica\.provider"\)/, "CommonJS");
  // Run from another directory: the package is found from the module, not from the working directory.
  const env = { BRIDGE_URL: "http://127.0.0.1:9", NATS_URL: "nats://127.0.0.1:9" };
  assert.equal(run(work, process.execPath, [join(nest, "out", "main.js")], env).trim(), "Replica 0");

  const help = run(app, join(app, "node_modules", ".bin", "outbox-replica"), ["--help"]);
  assert.match(help, /^The reference consumer/);
  assert.match(help, /--verify-interval/);

  writeFileSync(
    join(app, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true } }),
  );
  writeFileSync(
    join(app, "consumer.ts"),
    `import mysql from "mysql2/promise";
import { MysqlInbox, Replica, type Change, type InboxHandler } from "${packageJson.name}";

const pool = mysql.createPool({ host: "127.0.0.1", database: "billing" });
const handler: InboxHandler = {
  async reset(conn) { await conn.query("DELETE FROM accounts_replica"); },
  async load(conn, _columns, records) {
    await conn.query("INSERT INTO accounts_replica VALUES ?", [records.map((r) => r.values)]);
  },
  async apply(conn, change: Change) { await conn.query("DELETE FROM accounts_replica WHERE id = ?", [change.key]); },
};
const replica = new Replica({ url: "http://bridge:8080", source: "account", nats: { servers: "nats://nats:4222" },
  store: new MysqlInbox({ pool, handler }) });
export const applied: number = replica.appliedVersion;
`,
  );
  run(app, process.execPath, [join(clientRoot, "node_modules", "typescript", "bin", "tsc"), "-p", "."]);
});

test("README's consumer examples (exactly once, typed records, in a service) type-check against the tarball", () => {
  const readme = readFileSync(join(clientRoot, "README.md"), "utf8");
  const blocks = [...readme.matchAll(/```ts\n([^]*?)```/g)].map((m) => m[1]);
  const block = (start: string) => {
    const found = blocks.find((b) => b.startsWith(start));
    assert.ok(found, `README shows the block that begins ${start}`);
    return found;
  };
  const name = packageJson.name;
  const files: Record<string, string> = {
    "readme_inbox.ts": block('import mysql from "mysql2/promise";\nimport { MysqlInbox, Replica'),
    // What the README's snippets take from around them, declared.
    "readme_typed.ts":
      `import type { Pool } from "mysql2/promise";\nimport { MysqlInbox } from "${name}";\ndeclare const pool: Pool;\n` +
      block("type Account =") +
      "export { inbox };\n",
    "readme_service.ts":
      `import { Replica, type NatsOptions, type ReplicaLogger, type ReplicaStore } from "${name}";\n` +
      "declare const url: string, nats: NatsOptions, inbox: ReplicaStore, stop: AbortController;\n" +
      "declare const pino: () => ReplicaLogger, metrics: { mismatches: { inc(): void } };\n" +
      "declare const app: { get(path: string, h: (req: unknown, res: { status(n: number): { json(v: unknown): void } }) => void): void };\n" +
      block("const replica = new Replica({ url,"),
  };
  const dir = join(app, "readme");
  mkdirSync(dir);
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  const compilerOptions = { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["*.ts"] }));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  run(dir, process.execPath, [join(clientRoot, "node_modules", "typescript", "bin", "tsc"), "-p", "."]);
});

test("README's producer examples, compiled in the empty project against the tarball, run against MariaDB", async () => {
  // examples/*.ts import "outbox-bridge-client": here that is the installed tarball.
  const producer = join(app, "producer");
  for (const dir of ["examples", "test"]) mkdirSync(join(producer, dir), { recursive: true });
  for (const f of readdirSync(join(clientRoot, "examples"))) {
    cpSync(join(clientRoot, "examples", f), join(producer, "examples", f));
  }
  cpSync(join(clientRoot, "test", "example_units.ts"), join(producer, "test", "example_units.ts"));
  const compilerOptions = { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, skipLibCheck: true, outDir: "out" };
  writeFileSync(join(producer, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["examples/*.ts", "test/*.ts"] }));
  run(producer, process.execPath, [join(clientRoot, "node_modules", "typescript", "bin", "tsc"), "-p", "."]);

  const database = "t_ts_pack_" + suffix();
  const admin = await mysql.createConnection(mysqlOptions());
  try {
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.query(`USE ${database}`);
    await admin.query("CREATE TABLE accounts (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(64) NOT NULL)");
    for (const statement of outboxSchema("account_control_outbox")) await admin.query(statement);
    const ids = Array.from({ length: 9 }, (_, i) => String(2n ** 63n + BigInt(i))); // beyond 2^53
    const out = run(producer, process.execPath, [join("out", "test", "example_units.js"), database, ...ids]);
    const threw = `thrown inside the transaction, after the outbox append`;
    assert.deepEqual(JSON.parse(out), {
      mysql2: [`opened ${ids[0]}`, `threw ${ids[1]}: ${threw}`, `closed ${ids[2]}`],
      typeorm: [`opened ${ids[3]}`, `threw ${ids[4]}: ${threw}`, `closed ${ids[5]}`],
      knex: [`opened ${ids[6]}`, `threw ${ids[7]}: ${threw}`, `closed ${ids[8]}`],
    });
    const [accounts] = await admin.query<mysql.RowDataPacket[]>("SELECT CAST(id AS CHAR) AS id FROM accounts ORDER BY id");
    assert.deepEqual(accounts.map((r) => r.id), [ids[0], ids[3], ids[6]], "the opened accounts, none thrown or closed");
    const [outbox] = await admin.query<mysql.RowDataPacket[]>("SELECT entity_key, op FROM account_control_outbox ORDER BY id");
    assert.deepEqual(
      outbox.map((r) => `${r.op} ${r.entity_key}`),
      [0, 3, 6].flatMap((i) => [`upsert ${ids[i]}`, `upsert ${ids[i + 2]}`, `delete ${ids[i + 2]}`]),
    );
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${database}`);
    await admin.end();
  }
});
