#pragma once

#include <memory>
#include <string>

#include "db/connection.h"
#include "replica/store.h"

namespace outbox {

// The replica and its inbox row in MySQL/MariaDB (`outbox-bridge replica --inbox`), in the tables
// the TypeScript client's MysqlInbox uses (clients/typescript/src/mysql_inbox.ts): `outbox_inbox`
// (one row a source), `outbox_inbox_record` (one record hash a key) and, for the records
// themselves, `outbox_replica_record` (each its values as a JSON array of strings and nulls, in
// the row's column order), which its CLI keeps too: either consumer resumes from what the other left.
class MysqlInbox : public ReplicaStore {
 public:
  MysqlInbox(db::ConnectParams params, std::string source);

  Result<std::optional<InboxRow>> load(ReplicaRecords& records) override;
  Result<InboxRow> replace(const InboxRow& row, const ReplicaRecords& records) override;
  Result<bool> apply(const InboxRow& from, const InboxRow& to, const std::string& key,
                     const std::optional<RecordValues>& values) override;

 private:
  // Creates the three tables when they are missing (at the first connection).
  Status createTables(db::Connection& conn);
  // The connection, opened when there is none; dropped after any failure (a transaction whose
  // COMMIT got no answer is read back from the row, never guessed).
  Result<db::Connection*> connection();
  template <typename T>
  Result<T> dropOnFailure(Result<T> result);

  db::ConnectParams params_;
  std::string source_;
  std::unique_ptr<db::Connection> conn_;
  bool tablesCreated_ = false;
};

}  // namespace outbox
