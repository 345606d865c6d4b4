package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The inbox in MySQL/MariaDB (docs/consumers.md section 5): the application's change and the
// source's one inbox row in one transaction, in the tables and with the conditional UPDATE of the
// TypeScript client's MysqlInbox (clients/typescript/src/mysql_inbox.ts), so that a consumer moves
// between the two languages without a re-bootstrap. Besides the row, a table of one hash per
// record keeps the checksum current (the replica verifies against ?summary=true without holding
// the records in memory); the records themselves are the application's, in its own tables.

// InboxHandler is what the application does with the replica's data, inside the inbox's
// transaction.
type InboxHandler interface {
	// Reset: a bootstrap begins; remove what the application holds of this source.
	Reset(ctx context.Context, tx *sql.Tx, source string) error
	// Load: records of the snapshot, in batches (columns in the snapshot's order).
	Load(ctx context.Context, tx *sql.Tx, columns []string, records []SnapshotRecord) error
	// Apply: one change, with its version.
	Apply(ctx context.Context, tx *sql.Tx, change *Change) error
}

// MysqlInbox is a Store in MySQL/MariaDB through database/sql (go-sql-driver/mysql).
type MysqlInbox struct {
	db      *sql.DB
	handler InboxHandler
	inbox   string
	hashes  string
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,63}$`)

// NewMysqlInbox keeps the inbox row in inboxTable (default outbox_inbox) and the record hashes in
// hashTable (default outbox_inbox_record) of db.
func NewMysqlInbox(db *sql.DB, handler InboxHandler, inboxTable, hashTable string) (*MysqlInbox, error) {
	if inboxTable == "" {
		inboxTable = "outbox_inbox"
	}
	if hashTable == "" {
		hashTable = "outbox_inbox_record"
	}
	for _, n := range []string{inboxTable, hashTable} {
		if !plainName.MatchString(n) {
			return nil, fmt.Errorf("table '%s' is not a plain table name", n)
		}
	}
	return &MysqlInbox{db, handler, "`" + inboxTable + "`", "`" + hashTable + "`"}, nil
}

// CreateTables creates the two tables when they are missing.
func (m *MysqlInbox) CreateTables(ctx context.Context) error {
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS ` + m.inbox + ` (source VARCHAR(64) NOT NULL PRIMARY KEY,
		   epoch BIGINT UNSIGNED NOT NULL, applied_version BIGINT UNSIGNED NOT NULL,
		   stream_seq BIGINT UNSIGNED NOT NULL, stream_name VARCHAR(255) NOT NULL,
		   record_key VARCHAR(255) NOT NULL, columns_json TEXT NOT NULL, checksum CHAR(16) NOT NULL,
		   record_count BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL) ENGINE = InnoDB`,
		`CREATE TABLE IF NOT EXISTS ` + m.hashes + ` (source VARCHAR(64) NOT NULL,
		   entity_key VARBINARY(2048) NOT NULL, record_hash CHAR(16) NOT NULL,
		   PRIMARY KEY (source, entity_key)) ENGINE = InnoDB`,
	} {
		if _, err := m.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

type columnsJSON struct {
	Columns []string `json:"columns"`
	Numeric []bool   `json:"numeric"`
}

func encodeColumns(row InboxRow) string {
	c := columnsJSON{row.Columns, row.Numeric}
	if c.Columns == nil {
		c.Columns = []string{}
	}
	if c.Numeric == nil {
		c.Numeric = []bool{}
	}
	// As JSON.stringify writes it (the TypeScript MysqlInbox): no HTML escapes.
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c)
	return strings.TrimSuffix(out.String(), "\n")
}

func hex16(n uint64) string { return fmt.Sprintf("%016x", n) }

func (m *MysqlInbox) Load(ctx context.Context, source string) (*InboxRow, error) {
	var row InboxRow
	var columns, sum string
	err := m.db.QueryRowContext(ctx, `SELECT epoch, applied_version, stream_seq, stream_name, record_key,
	    columns_json, checksum, record_count, generation FROM `+m.inbox+` WHERE source = ?`, source).Scan(
		&row.Epoch, &row.AppliedVersion, &row.StreamSeq, &row.StreamName, &row.Key, &columns, &sum,
		&row.RecordCount, &row.Generation)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c columnsJSON
	if err := json.Unmarshal([]byte(columns), &c); err != nil || len(c.Columns) != len(c.Numeric) {
		return nil, fmt.Errorf("%s: malformed columns_json", m.inbox)
	}
	row.Columns, row.Numeric = c.Columns, c.Numeric
	if row.Sum, err = strconv.ParseUint(sum, 16, 64); err != nil {
		return nil, fmt.Errorf("%s: malformed checksum", m.inbox)
	}
	return &row, nil
}

type mysqlBootstrap struct {
	m      *MysqlInbox
	tx     *sql.Tx
	source string
}

func (m *MysqlInbox) BeginBootstrap(ctx context.Context, source string, _ *SnapshotHeader) (Bootstrap, error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	// No lock on the inbox row until the end: a first bootstrap's FOR UPDATE would lock the gap
	// where other sources' rows go, for as long as the snapshot takes to read.
	if _, err = tx.ExecContext(ctx, `DELETE FROM `+m.hashes+` WHERE source = ?`, source); err == nil {
		err = m.handler.Reset(ctx, tx, source)
	}
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return &mysqlBootstrap{m, tx, source}, nil
}

func (b *mysqlBootstrap) Records(ctx context.Context, columns []string, batch []SnapshotRecord) error {
	if len(batch) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(batch))
	for _, r := range batch {
		args = append(args, b.source, []byte(r.Key), hex16(RecordHash(r.Values)))
	}
	q := `INSERT INTO ` + b.m.hashes + ` (source, entity_key, record_hash) VALUES ` + placeholders(len(batch), 3)
	if _, err := b.tx.ExecContext(ctx, q, args...); err != nil {
		return err
	}
	return b.m.handler.Load(ctx, b.tx, columns, batch)
}

// placeholders: rows of (?, ?, ...) for a multi-row INSERT.
func placeholders(rows, columns int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", columns), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

func (b *mysqlBootstrap) Commit(ctx context.Context, row InboxRow) (InboxRow, error) {
	_, err := b.tx.ExecContext(ctx, `INSERT INTO `+b.m.inbox+` (source, epoch, applied_version, stream_seq,
	    stream_name, record_key, columns_json, checksum, record_count, generation)
	    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
	    ON DUPLICATE KEY UPDATE epoch = VALUES(epoch), applied_version = VALUES(applied_version),
	      stream_seq = VALUES(stream_seq), stream_name = VALUES(stream_name), record_key = VALUES(record_key),
	      columns_json = VALUES(columns_json), checksum = VALUES(checksum), record_count = VALUES(record_count),
	      generation = generation + 1`,
		b.source, row.Epoch, row.AppliedVersion, row.StreamSeq, row.StreamName, row.Key, encodeColumns(row),
		hex16(row.Sum), row.RecordCount)
	if err == nil {
		err = b.tx.QueryRowContext(ctx, `SELECT generation FROM `+b.m.inbox+` WHERE source = ?`, b.source).
			Scan(&row.Generation)
	}
	if err == nil {
		err = b.tx.Commit()
	}
	if err != nil {
		_ = b.tx.Rollback()
		return row, err
	}
	return row, nil
}

func (b *mysqlBootstrap) Abort(context.Context) error { return b.tx.Rollback() }

func (m *MysqlInbox) Apply(ctx context.Context, change *Change, from InboxRow) (*InboxRow, error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	key := []byte(change.Key)
	var oldHash, newHash *uint64
	var old string
	err = tx.QueryRowContext(ctx, `SELECT record_hash FROM `+m.hashes+` WHERE source = ? AND entity_key = ?`,
		change.Source, key).Scan(&old)
	if err != nil && err != sql.ErrNoRows {
		return nil, err
	}
	if err == sql.ErrNoRows {
		err = nil // no record of that key: an upsert adds one, a delete removes none
	} else {
		h, perr := strconv.ParseUint(old, 16, 64)
		if perr != nil {
			return nil, fmt.Errorf("%s: malformed record_hash", m.hashes)
		}
		oldHash = &h
	}
	if change.Values != nil {
		h := RecordHash(change.Values)
		newHash = &h
	}
	if err := m.handler.Apply(ctx, tx, change); err != nil {
		return nil, err
	}
	if newHash != nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO `+m.hashes+` (source, entity_key, record_hash) VALUES (?, ?, ?)
		    ON DUPLICATE KEY UPDATE record_hash = VALUES(record_hash)`, change.Source, key, hex16(*newHash))
	} else if oldHash != nil {
		_, err = tx.ExecContext(ctx, `DELETE FROM `+m.hashes+` WHERE source = ? AND entity_key = ?`, change.Source, key)
	}
	if err != nil {
		return nil, err
	}
	// Last, and only from the row this consumer knows: when another moved it, all of this is
	// rolled back (its lock makes the two take turns).
	next := NextRow(from, change, oldHash, newHash)
	res, err := tx.ExecContext(ctx, `UPDATE `+m.inbox+` SET applied_version = ?, stream_seq = ?, checksum = ?,
	    record_count = ?, columns_json = ? WHERE source = ? AND epoch = ? AND applied_version = ? AND generation = ?`,
		change.Version, change.StreamSeq, hex16(next.Sum), next.RecordCount, encodeColumns(next), change.Source,
		from.Epoch, from.AppliedVersion, from.Generation)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	committed = true
	return &next, nil
}
