package main

// The CLI's --inbox: the replica and its inbox row in MySQL/MariaDB through outbox.MysqlInbox,
// the records in `outbox_replica_record` (each its values as a JSON array of strings and nulls,
// in the row's column order: columns_json says which are numbers), the tables `outbox-bridge
// replica --inbox` (src/replica/mysql_inbox.cpp) and the TypeScript CLI use: any of them resumes
// from what another left.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	outbox "outbox-bridge/clients/go"
)

const recordsTable = "outbox_replica_record"

// valuesJSON: a record's values as a JSON array of strings and nulls.
func valuesJSON(values []outbox.Value) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		if v == nil {
			b.WriteString("null")
		} else {
			outbox.AppendJSONString(&b, *v)
		}
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// cliRecords keeps the records beside the inbox row, in the inbox's transaction.
type cliRecords struct{ source string }

func (h cliRecords) Reset(ctx context.Context, tx *sql.Tx, source string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM `+recordsTable+` WHERE source = ?`, source)
	return err
}

func (h cliRecords) Load(ctx context.Context, tx *sql.Tx, _ []string, batch []outbox.SnapshotRecord) error {
	args := make([]any, 0, 3*len(batch))
	rows := make([]string, len(batch))
	for i, r := range batch {
		args = append(args, h.source, []byte(r.Key), valuesJSON(r.Values))
		rows[i] = "(?, ?, ?)"
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO `+recordsTable+` (source, entity_key, record_values) VALUES `+
		strings.Join(rows, ", "), args...)
	return err
}

func (h cliRecords) Apply(ctx context.Context, tx *sql.Tx, c *outbox.Change) error {
	var err error
	if c.Values == nil {
		_, err = tx.ExecContext(ctx, `DELETE FROM `+recordsTable+` WHERE source = ? AND entity_key = ?`, c.Source,
			[]byte(c.Key))
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO `+recordsTable+` (source, entity_key, record_values) VALUES (?, ?, ?)
		    ON DUPLICATE KEY UPDATE record_values = VALUES(record_values)`, c.Source, []byte(c.Key), valuesJSON(c.Values))
	}
	return err
}

type cliInbox struct {
	db     *sql.DB
	source string
	store  *outbox.MysqlInbox
}

func newCliInbox(db *sql.DB, source string) *cliInbox {
	store, _ := outbox.NewMysqlInbox(db, cliRecords{source}, "", "")
	return &cliInbox{db, source, store}
}

// createTables: the inbox's two and the records'.
func (c *cliInbox) createTables(ctx context.Context) error {
	if err := c.store.CreateTables(ctx); err != nil {
		return err
	}
	_, err := c.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+recordsTable+` (source VARCHAR(64) NOT NULL,
	    entity_key VARBINARY(2048) NOT NULL, record_values LONGBLOB NOT NULL, PRIMARY KEY (source, entity_key))
	    ENGINE = InnoDB`)
	return err
}

// dump writes the inbox row and the records as of one moment to w, for --dump: read in the
// byte order of their keys (entity_key is VARBINARY) and written one at a time.
func (c *cliInbox) dump(ctx context.Context, w io.Writer) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), "COMMIT") //nolint:errcheck
	row, err := loadOn(ctx, conn, c.source)
	if err != nil {
		return err
	}
	d := outbox.NewDumpWriter(w, c.source, row)
	if row != nil {
		rows, err := conn.QueryContext(ctx, `SELECT record_values FROM `+recordsTable+` WHERE source = ?
		    ORDER BY entity_key`, c.source)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var values []byte
			var texts []*string
			if err := rows.Scan(&values); err != nil {
				return err
			}
			if err := json.Unmarshal(values, &texts); err != nil {
				return err
			}
			if err := d.Record(texts); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return d.Close()
}

// loadOn: the inbox row read on conn (inside its transaction).
func loadOn(ctx context.Context, conn *sql.Conn, source string) (*outbox.InboxRow, error) {
	var row outbox.InboxRow
	var columns, sum string
	err := conn.QueryRowContext(ctx, `SELECT epoch, applied_version, record_key, columns_json, checksum
	    FROM outbox_inbox WHERE source = ?`, source).Scan(&row.Epoch, &row.AppliedVersion, &row.Key, &columns, &sum)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c struct {
		Columns []string `json:"columns"`
		Numeric []bool   `json:"numeric"`
	}
	// What outbox.MysqlInbox.Load refuses too: another consumer's row, read here, is checked alike.
	if err := json.Unmarshal([]byte(columns), &c); err != nil || len(c.Columns) != len(c.Numeric) {
		return nil, fmt.Errorf("outbox_inbox: malformed columns_json")
	}
	row.Columns, row.Numeric = c.Columns, c.Numeric
	row.Sum, _ = outbox.ParseChecksum("sha256-sum64:" + sum)
	return &row, nil
}
