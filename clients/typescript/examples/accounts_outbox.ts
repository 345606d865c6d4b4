import { OutboxProducer } from "outbox-bridge-client";

// One producer per outbox table and entity type, set up like the source: the key and the payload
// are SQL over a row of the business table, the snapshot query's snapshot_key column and fields.
export const accountsOutbox = new OutboxProducer({
  table: "account_control_outbox",
  entityType: "account",
  from: "accounts",
  key: "id",
  payload: "JSON_OBJECT('id', id, 'displayName', display_name)",
});
