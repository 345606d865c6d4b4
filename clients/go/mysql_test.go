package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// The producer and MysqlInbox against the stack's MariaDB (OUTBOX_TEST_MYSQL_* of tools/stack's
// env file): a missing server fails, never skips. Each test has a database of its own.

func testDB(t *testing.T) *sql.DB {
	t.Helper()
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
	name := fmt.Sprintf("go_client_%d", rand.Int63())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		_, _ = admin.Exec("DROP DATABASE " + name)
		admin.Close()
	})
	return db
}

func mustExec(t *testing.T, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) {
	t.Helper()
	if _, err := q.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// begin: a transaction rolled back at the end (before the database is dropped) unless committed.
func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func producerTables(t *testing.T, db *sql.DB) *Producer {
	mustExec(t, db, "CREATE TABLE accounts (id INT(6) ZEROFILL PRIMARY KEY, display_name VARCHAR(100))")
	mustExec(t, db, `CREATE TABLE account_outbox (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
	    entity_type VARCHAR(64) NOT NULL, entity_key VARCHAR(191) NOT NULL, op VARCHAR(16) NOT NULL DEFAULT 'upsert',
	    payload JSON NULL, headers JSON NULL)`)
	p, err := NewProducer(Producer{Table: "account_outbox", EntityType: "account", From: "accounts", Key: "id",
		Payload: "JSON_OBJECT('id', CONCAT(id), 'displayName', display_name)"}) // ZEROFILL: its zeros, as a string
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProducerAppendsInTheCallersTransaction(t *testing.T) {
	db := testDB(t)
	p := producerTables(t, db)
	ctx := context.Background()
	tx := begin(t, db)
	mustExec(t, tx, "INSERT INTO accounts VALUES (42, 'Acme')")
	key, err := p.Upsert(ctx, tx, RowChange{Where: "id = ?", Params: []any{42},
		Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if err != nil || key != "000042" { // the key as the server renders it: ZEROFILL's zeros
		t.Fatalf("%q, %v", key, err)
	}
	key, err = p.Delete(ctx, tx, RowChange{Where: "id = ?", Params: []any{42}})
	if err != nil || key != "000042" {
		t.Fatalf("%q, %v", key, err)
	}
	mustExec(t, tx, "DELETE FROM accounts WHERE id = 42")
	// Nothing is seen before the caller commits: the producer never does.
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM account_outbox").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows outside the transaction before its commit (%v)", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT entity_type, entity_key, op, COALESCE(payload, ''), COALESCE(headers, '') " +
		"FROM account_outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var a, b, c, d, e string
		if err := rows.Scan(&a, &b, &c, &d, &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %s", a, b, c, d, e))
	}
	want := []string{`account 000042 upsert {"id": "000042", "displayName": "Acme"} {"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`,
		"account 000042 delete  "}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows\n%q\nwant\n%q", got, want)
	}
}

func TestProducerRefusesBeforeTheInsert(t *testing.T) {
	db := testDB(t)
	p := producerTables(t, db)
	ctx := context.Background()
	mustExec(t, db, "INSERT INTO accounts VALUES (1, 'One'), (2, 'Two')")
	tx := begin(t, db)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range []struct {
		runner TxRunner
		change RowChange
	}{
		{db, RowChange{Where: "id = 1"}},   // a pool
		{conn, RowChange{Where: "id = 1"}}, // a connection with no transaction open
		{tx, RowChange{Where: "id = 3"}},   // no row
		{tx, RowChange{Where: "id > 0"}},   // two rows
		{tx, RowChange{Where: "id = 1", Headers: map[string]string{"Nats-Msg-Id": "x"}}},
		{tx, RowChange{Where: "id = 1", Headers: map[string]string{"a": "line\nbreak"}}},
	} {
		_, err := p.Upsert(ctx, c.runner, c.change)
		var rule *ProducerRuleError
		if !errors.As(err, &rule) {
			t.Errorf("%T %+v: %v", c.runner, c.change, err)
		}
	}
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM account_outbox").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows appended by refused calls (%v)", n, err)
	}
	for _, bad := range []Producer{{Table: "a b", EntityType: "x", From: "t", Key: "k", Payload: "p"},
		{Table: "t", EntityType: "a.b", From: "t", Key: "k", Payload: "p"},
		{Table: "t", EntityType: "x", From: "t", Key: "k = ?", Payload: "p"},
		{Table: "t", EntityType: "x", From: "t", Key: "k", Payload: " "}} {
		if _, err := NewProducer(bad); err == nil {
			t.Errorf("NewProducer(%+v) took it", bad)
		}
	}
}
