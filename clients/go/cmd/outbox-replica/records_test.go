package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// --dump with --inbox reads what another consumer (C++, TypeScript, Go) left in the tables: a
// columns_json whose columns and numeric flags disagree is an error, as outbox.MysqlInbox.Load
// says, never a panic. On the stack's MariaDB (OUTBOX_TEST_MYSQL_*; missing, the test fails).
func TestDumpRefusesAMalformedColumnsJSON(t *testing.T) {
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set: run under tools/test (the stack's MariaDB)", name)
		}
		return v
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = env("OUTBOX_TEST_MYSQL_USER"), env("OUTBOX_TEST_MYSQL_PASSWORD")
	cfg.Net, cfg.Addr = "tcp", env("OUTBOX_TEST_MYSQL_HOST")+":"+env("OUTBOX_TEST_MYSQL_PORT")
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cfg.DBName = fmt.Sprintf("go_cli_%d", rand.Int63())
	if _, err := admin.Exec("CREATE DATABASE " + cfg.DBName); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec("DROP DATABASE " + cfg.DBName) //nolint:errcheck
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	inbox := newCliInbox(db, "account")
	if err := inbox.createTables(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO outbox_inbox (source, epoch, applied_version, stream_seq, stream_name, record_key, columns_json,
		    checksum, record_count, generation) VALUES ('account', 1, 5, 5, 'CONTROL_ACCOUNT', 'id',
		    '{"columns":["id","name"],"numeric":[true]}', '0000000000000000', 1, 1)`,
		`INSERT INTO ` + recordsTable + ` VALUES ('account', '1', '["1","Acme"]')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	err = inbox.dump(ctx, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "malformed columns_json") {
		t.Fatalf("dump: %v", err)
	}
}
