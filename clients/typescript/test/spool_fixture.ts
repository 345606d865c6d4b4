// A replica process for test/spool.test.ts: a MemoryStore that loads each batch of a snapshot
// slowly, with a spool. Configured by the environment: SPOOL_URL, SPOOL_SOURCE, SPOOL_DIR,
// OUTBOX_TEST_NATS_URL. Prints "loading" when the first batch reaches the store.
import { MemoryStore, Replica, type Bootstrap } from "../src/index.js";
import { env } from "./support.js";

class SlowStore extends MemoryStore {
  override async beginBootstrap(source: string): Promise<Bootstrap> {
    const b = await super.beginBootstrap(source);
    let told = false;
    return {
      ...b,
      records: async (columns, batch) => {
        if (!told) console.log("loading");
        told = true;
        await new Promise((r) => setTimeout(r, 200));
        await b.records(columns, batch);
      },
    };
  }
}

const replica = new Replica({
  url: env("SPOOL_URL"),
  source: env("SPOOL_SOURCE"),
  nats: { servers: env("OUTBOX_TEST_NATS_URL") },
  store: new SlowStore(),
  spool: env("SPOOL_DIR"),
  snapshotBatch: 100,
});
await replica.run();
