package outbox_test

// The README's examples, compiled by go vet and go test (not run: they need a bridge).

import (
	"context"
	"database/sql"
	"log"
	"net/http"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"

	outbox "outbox-bridge/clients/go"
)

var accounts, _ = outbox.NewProducer(outbox.Producer{
	Table:      "account_control_outbox",
	EntityType: "account",
	From:       "accounts",
	Key:        "id",
	Payload:    "JSON_OBJECT('id', id, 'displayName', display_name)",
})

// renameAccount: the business write, then its outbox row, in one transaction of the caller's.
func renameAccount(ctx context.Context, db *sql.DB, id int64, name, traceparent string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: nothing to roll back
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET display_name = ? WHERE id = ?", name, id); err != nil {
		return err
	}
	if _, err := accounts.Upsert(ctx, tx, outbox.RowChange{Where: "id = ?", Params: []any{id},
		Headers: map[string]string{"traceparent": traceparent}}); err != nil {
		return err // a *outbox.ProducerRuleError before anything was appended: roll back
	}
	return tx.Commit()
}

func Example_producer() {
	db, err := sql.Open("mysql", os.Getenv("SHOP_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	if err := renameAccount(context.Background(), db, 42, "Acme", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"); err != nil {
		log.Fatal(err)
	}
}

// accountsReplica keeps accounts_replica (id, display_name) in the inbox's transaction.
type accountsReplica struct{}

func (accountsReplica) Reset(ctx context.Context, tx *sql.Tx, source string) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM accounts_replica")
	return err
}

func (accountsReplica) Load(ctx context.Context, tx *sql.Tx, columns []string, batch []outbox.SnapshotRecord) error {
	for _, r := range batch {
		var a struct {
			ID          int64  `outbox:"id"`
			DisplayName string `outbox:"displayName"`
		}
		if err := outbox.Decode(columns, r.Values, &a); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO accounts_replica VALUES (?, ?)", a.ID, a.DisplayName); err != nil {
			return err
		}
	}
	return nil
}

func (accountsReplica) Apply(ctx context.Context, tx *sql.Tx, c *outbox.Change) error {
	if c.Delete {
		_, err := tx.ExecContext(ctx, "DELETE FROM accounts_replica WHERE id = ?", c.Key)
		return err
	}
	var a struct {
		ID          int64  `outbox:"id"`
		DisplayName string `outbox:"displayName"`
	}
	if err := outbox.Decode(c.Columns, c.Values, &a); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "REPLACE INTO accounts_replica VALUES (?, ?)", a.ID, a.DisplayName)
	return err
}

func Example_consumer() {
	db, err := sql.Open("mysql", os.Getenv("REPLICA_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := outbox.NewMysqlInbox(db, accountsReplica{}, "", "")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := inbox.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}
	replica := outbox.NewReplica(outbox.ReplicaOptions{
		URL:    "http://bridge:8080",
		Source: "account",
		NATS:   outbox.NatsOptions{URL: "nats://nats:4222"},
		Store:  inbox,
		Report: func(line string) { log.Print(line) },
	})
	defer replica.Close()
	// A health check: how far behind, and the last error.
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		s := replica.Status()
		if !s.Following || (s.LastError != nil && time.Since(s.LastErrorAt) < time.Minute) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	_ = replica.Run(ctx) // until ctx ends
}
