// The comparison of the benchmark (README, "Benchmark"; docs/design.md, "Performance"): a
// well-written batched Node.js outbox poller (mysql2 + nats.js) doing the bridge's job — read
// pending rows through idx_pending, assign their versions in one statement, publish the batch
// concurrently with Nats-Msg-Id and wait for every ack — as a team would write it instead of
// running outbox-bridge. Run by tools/bench.
//
// usage: node poller.mjs MYSQL_URL PASSWORD NATS_URL TABLE SUBJECT_PREFIX SOURCE ROWS
import mysql from 'mysql2/promise';
import { connect, headers } from 'nats';

const [dsn, password, natsUrl, table, prefix, source, rowsText] = process.argv.slice(2);
const total = Number(rowsText);
const url = new URL(dsn.replace(/^mysql:/, 'http:'));
const db = await mysql.createConnection({
  host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username),
  password, database: url.pathname.slice(1), supportBigNumbers: true,
});
const nc = await connect({ servers: natsUrl });
const js = nc.jetstream();

let version = 0;
const started = process.hrtime.bigint();
while (version < total) {
  const [rows] = await db.query(
    `SELECT id, entity_type, entity_key, op, payload FROM ${table} FORCE INDEX (idx_pending)
     WHERE version IS NULL ORDER BY id LIMIT 1000`);
  if (rows.length === 0) {
    await new Promise((r) => setTimeout(r, 10));
    continue;
  }
  await db.beginTransaction();
  await db.query('SET @v := ?', [version]);
  await db.query(`UPDATE ${table} SET version = (@v := @v + 1) WHERE id IN (?) ORDER BY id`, [rows.map((r) => r.id)]);
  await db.commit();
  await Promise.all(rows.map((row, i) => {
    const v = version + i + 1;
    const h = headers();
    h.set('Outbox-Source', source);
    h.set('Outbox-Version', String(v));
    h.set('Outbox-Entity-Type', row.entity_type);
    h.set('Outbox-Entity-Key', row.entity_key);
    h.set('Outbox-Op', row.op);
    const body = row.payload === null ? new Uint8Array() : Buffer.from(typeof row.payload === 'string' ? row.payload : JSON.stringify(row.payload));
    return js.publish(`${prefix}.${row.entity_type}`, body, { msgID: `${source}:${v}`, headers: h });
  }));
  version += rows.length;
  await db.query('UPDATE outbox_source_state SET published_through = ? WHERE source = ?', [version, source]);
}
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
console.log(JSON.stringify({ rows: version, seconds, rate: version / seconds }));
await nc.drain();
await db.end();
