export { canonical, Checksum, recordHash } from "./checksum.js";
export type { RecordValues } from "./checksum.js";
export { escapeSubjectToken, fnv1a32, keyPartition, unescapeSubjectToken } from "./subject.js";
export { OutboxProducer, ProducerRuleError } from "./producer.js";
export type { OutboxProducerOptions, RowChange } from "./producer.js";
export type {
  KnexTransaction,
  Mysql2Transaction,
  RunSql,
  TransactionHandle,
  TypeOrmEntityManager,
  TypeOrmQueryRunner,
} from "./producer_handle.js";
export { hasLoneSurrogate, headersProblem, keyProblem } from "./rules.js";
export { Incomplete, parseRecord, scanObject, scanValue } from "./json.js";
export type { RecordField, Scanned } from "./json.js";
export { readSnapshot, SnapshotRejected } from "./snapshot.js";
export type { SnapshotHeader, SnapshotRecord, SnapshotSummary } from "./snapshot.js";
export { MemoryStore, nextRow } from "./store.js";
export type { Bootstrap, Change, Fields, InboxRow, ReplicaRecord, ReplicaStore } from "./store.js";
export { decodeJson } from "./typed.js";
export type { NumberPolicy } from "./typed.js";
export { MysqlInbox } from "./mysql_inbox.js";
export type { InboxHandler, MysqlInboxOptions } from "./mysql_inbox.js";
export { dumpJson } from "./dump.js";
export { HandlerError, Replica, RetryableError } from "./replica.js";
export type { NatsOptions, ReplicaCounters, ReplicaOptions } from "./replica.js";
export type {
  BootstrapReason,
  ReplicaEvents,
  ReplicaLogger,
  ReplicaState,
  ReplicaStatus,
} from "./replica_events.js";
export { SettledReactor, settledChangeOf } from "./settled.js";
export type { SettledChange, SettledReactorOptions, SettledReactorStatus } from "./settled.js";
