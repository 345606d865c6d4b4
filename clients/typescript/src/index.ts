export { canonical, Checksum, recordHash } from "./checksum.js";
export type { RecordValues } from "./checksum.js";
export { escapeSubjectToken, fnv1a32, keyPartition, unescapeSubjectToken } from "./subject.js";
export { OutboxProducer, OutboxTransaction, ProducerRuleError } from "./producer.js";
export type { OutboxProducerOptions, PayloadFrom } from "./producer.js";
export { headersProblem, keyProblem } from "./rules.js";
