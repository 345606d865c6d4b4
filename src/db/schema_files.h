#pragma once

#include <string>
#include <vector>

namespace outbox::db {

// A numbered schema file from sql/, compiled in. scope "bridge" runs once per database; scope
// "outbox" runs once per outbox table, with {{outbox_table}} replaced.
struct SchemaFile {
  const char* scope;
  const char* name;
  const char* sql;
};

const std::vector<SchemaFile>& schemaFiles();

}  // namespace outbox::db
