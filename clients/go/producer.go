package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Appending outbox rows by the producer rule (README, "The producer rule"): in the caller's own
// transaction, after the business write, with the key and the payload built by SQL from the row
// just written — so both are what the snapshot query returns, and two changes of one entity are
// versioned in commit order. The producer never begins, commits or rolls back: the transaction is
// the caller's (clients/typescript/src/producer.ts does the same).

// TxRunner runs statements on one transaction: a *sql.Tx, or a *sql.Conn on which the caller
// began one. A *sql.DB is refused: each statement could go to another connection of its pool.
type TxRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ProducerRuleError is a breach of the producer rule, or a row the bridge would refuse; returned
// before anything was appended (roll the transaction back).
type ProducerRuleError struct{ Reason string }

func (e *ProducerRuleError) Error() string { return e.Reason }

func ruleError(format string, a ...any) error { return &ProducerRuleError{fmt.Sprintf(format, a...)} }

// Producer appends one source's outbox rows for one entity type.
type Producer struct {
	Table      string // the source's outbox table, e.g. "account_control_outbox"
	EntityType string // the entity type of its rows (a subject token), e.g. "account"
	From       string // the business table the rows are read from, e.g. "accounts"
	// Key is SQL over a row of From: the entity's key, as the snapshot query's snapshot_key column
	// reads it, e.g. "id". Its text is taken as the server renders it. Code, not data.
	Key string
	// Payload is SQL over a row of From: the snapshot query's fields as a JSON object, e.g.
	// "JSON_OBJECT('id', id, 'displayName', display_name)". Code, not data.
	Payload string

	noInTransaction uint32 // 1: the server has no @@in_transaction (MySQL); atomic (producer_tx.go)
}

// RowChange says which row of From a change is about.
type RowChange struct {
	Where   string            // the condition that finds the one row, with ? placeholders, e.g. "id = ?"
	Params  []any             // the values of its placeholders
	Headers map[string]string // message headers (e.g. traceparent); reserved names are refused
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// NewProducer checks the names and SQL of p.
func NewProducer(p Producer) (*Producer, error) {
	if !identifier.MatchString(p.Table) {
		return nil, ruleError("outbox table '%s' is no identifier", p.Table)
	}
	if !identifier.MatchString(p.From) {
		return nil, ruleError("table '%s' is no identifier", p.From)
	}
	if p.EntityType == "" || strings.ContainsAny(p.EntityType, " .*>\t\r\n") || hasControl(p.EntityType) {
		return nil, ruleError("entity type '%s' is not a subject token", p.EntityType)
	}
	for name, text := range map[string]string{"Key": p.Key, "Payload": p.Payload} {
		if strings.TrimSpace(text) == "" {
			return nil, ruleError("%s is empty", name)
		}
		// The statements bind their own values ahead of Where's: a placeholder here would take one.
		if strings.Contains(text, "?") {
			return nil, ruleError("%s holds a '?': values go in Params, after Where", name)
		}
	}
	return &p, nil
}

// Upsert appends the upsert of the row change.Where finds, in the caller's transaction tx, AFTER
// the business write that wrote it; it returns the entity key's text.
func (p *Producer) Upsert(ctx context.Context, tx TxRunner, change RowChange) (string, error) {
	headers, err := p.prepare(ctx, tx, change)
	if err != nil {
		return "", err
	}
	key, err := p.readKey(ctx, tx, change, "", "Upsert reads the row the business write just wrote")
	if err != nil {
		return "", err
	}
	res, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO `%s` (entity_type, entity_key, op, payload, headers) "+
		"SELECT ?, CONCAT(%s), 'upsert', %s, ? FROM `%s` WHERE %s", p.Table, p.Key, p.Payload, p.From, change.Where),
		append([]any{p.EntityType, headers}, change.Params...)...)
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", ruleError("the upsert of %s '%s' appended %d rows, not 1: roll back", p.EntityType, key, n)
	}
	return key, nil
}

// Delete appends the delete of the row change.Where finds, in the caller's transaction tx, BEFORE
// the business DELETE: the key is read from the row while it is there, and the read locks it
// (FOR UPDATE) as the DELETE would, so two changes of the entity keep their order.
func (p *Producer) Delete(ctx context.Context, tx TxRunner, change RowChange) (string, error) {
	headers, err := p.prepare(ctx, tx, change)
	if err != nil {
		return "", err
	}
	key, err := p.readKey(ctx, tx, change, " FOR UPDATE",
		"Delete comes before the business DELETE: it reads the key from the row and locks it")
	if err != nil {
		return "", err
	}
	_, err = tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO `%s` (entity_type, entity_key, op, payload, headers) "+
		"VALUES (?, ?, 'delete', NULL, ?)", p.Table), p.EntityType, key, headers)
	return key, err
}

// prepare refuses before anything is appended: a handle that is no open transaction, headers the
// bridge would refuse. It returns the headers column's value (NULL when there are none).
func (p *Producer) prepare(ctx context.Context, tx TxRunner, change RowChange) (any, error) {
	if _, ok := tx.(*sql.DB); ok || tx == nil {
		return nil, ruleError("a *sql.DB runs each statement on a connection of its pool: pass the *sql.Tx of " +
			"db.BeginTx (the business write and the outbox row commit together)")
	}
	if strings.TrimSpace(change.Where) == "" {
		return nil, ruleError("Where is empty")
	}
	for i, v := range change.Params {
		if s, ok := v.(string); ok && !utf8.ValidString(s) {
			return nil, ruleError("Params[%d] is not valid UTF-8", i)
		}
	}
	var headers any
	if len(change.Headers) > 0 {
		if problem := HeadersProblem(change.Headers); problem != "" {
			return nil, ruleError("%s", problem)
		}
		b, _ := json.Marshal(change.Headers)
		headers = string(b)
	}
	open, err := p.inTransaction(ctx, tx)
	if err != nil {
		return nil, err
	}
	if !open {
		return nil, ruleError("no transaction is open on this connection: begin one (the business write and the " +
			"outbox row commit together)")
	}
	return headers, nil
}

// readKey is the key's text of the one row change.Where finds, as the server renders it (CONCAT:
// the text a snapshot reads).
func (p *Producer) readKey(ctx context.Context, tx TxRunner, change RowChange, lock, rule string) (string, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf("SELECT CONCAT(%s) FROM `%s` WHERE %s LIMIT 2%s", p.Key, p.From,
		change.Where, lock), change.Params...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var keys []sql.NullString
	for rows.Next() {
		var k sql.NullString
		if err := rows.Scan(&k); err != nil {
			return "", err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(keys) != 1 {
		found := "no row"
		if len(keys) > 1 {
			found = "more than one row"
		}
		return "", ruleError("%s: found %s in %s where %s; %s", p.EntityType, found, p.From, change.Where, rule)
	}
	if !keys[0].Valid {
		return "", ruleError("%s: entity_key is NULL", p.EntityType)
	}
	if problem := KeyProblem(keys[0].String); problem != "" {
		return "", ruleError("%s: %s", p.EntityType, problem)
	}
	return keys[0].String, nil
}
