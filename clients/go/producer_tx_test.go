package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// Whether a transaction is open on a connection the caller hands the Producer, on MySQL too:
// MySQL 8 has no @@in_transaction (error 1193). The stack runs MariaDB: a connection that answers
// that query as MySQL does stands in for it; the rest of what it runs is MariaDB's.

// mysql8Conn is a *sql.Conn that answers SELECT @@in_transaction as MySQL 8 does.
type mysql8Conn struct {
	*sql.Conn
	asked int
}

func (c *mysql8Conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if strings.Contains(query, "@@in_transaction") {
		c.asked++
		return nil, &mysql.MySQLError{Number: 1193, Message: "Unknown system variable 'in_transaction'"}
	}
	return c.Conn.QueryContext(ctx, query, args...)
}

func TestProducerOnAServerWithoutInTransaction(t *testing.T) {
	db := testDB(t)
	p := producerTables(t, db)
	ctx := context.Background()
	mustExec(t, db, "INSERT INTO accounts VALUES (1, 'One')")
	raw, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn := &mysql8Conn{Conn: raw}
	// No transaction open: refused, as a rule, not an error of the server.
	_, err = p.Upsert(ctx, conn, RowChange{Where: "id = 1"})
	var rule *ProducerRuleError
	if !errors.As(err, &rule) {
		t.Fatalf("no transaction open: %v", err)
	}
	mustExec(t, raw, "BEGIN")
	for i := 0; i < 2; i++ {
		if _, err := p.Upsert(ctx, conn, RowChange{Where: "id = 1"}); err != nil {
			t.Fatalf("upsert %d in a transaction: %v", i, err)
		}
	}
	mustExec(t, raw, "COMMIT")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM account_outbox").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows appended (%v)", n, err)
	}
	// Asked once: a server without the variable is not asked again (an error in its log each call).
	if conn.asked != 1 {
		t.Fatalf("@@in_transaction asked %d times", conn.asked)
	}
	// The probe leaves no transaction open behind it.
	_, err = p.Upsert(ctx, conn, RowChange{Where: "id = 1"})
	if !errors.As(err, &rule) {
		t.Fatalf("after the COMMIT: %v", err)
	}
}

// The decisions, from the driver's error values.
func TestInTransactionFallbackDecision(t *testing.T) {
	for _, c := range []struct {
		err                          error
		unknownVariable, noSavepoint bool
	}{
		{&mysql.MySQLError{Number: 1193, Message: "Unknown system variable 'in_transaction'"}, true, false},
		{fmt.Errorf("asking: %w", &mysql.MySQLError{Number: 1193}), true, false},
		{&mysql.MySQLError{Number: 1305, Message: "SAVEPOINT outbox_bridge_in_transaction does not exist"}, false, true},
		{&mysql.MySQLError{Number: 1142, Message: "command denied"}, false, false},
		{mysql.ErrInvalidConn, false, false},
		{nil, false, false},
	} {
		if got := isMysqlError(c.err, errUnknownSystemVariable); got != c.unknownVariable {
			t.Errorf("%v: unknown variable %v", c.err, got)
		}
		if got := isMysqlError(c.err, errSavepointDoesNotExist); got != c.noSavepoint {
			t.Errorf("%v: no savepoint %v", c.err, got)
		}
	}
}
