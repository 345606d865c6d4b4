package outbox

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// Whether a transaction is open on the handle the caller gave the Producer (README, "The producer
// rule": the business write and the outbox row commit together).
//
// A *sql.Tx is one: database/sql ran its BEGIN. On another handle (a *sql.Conn on which the caller
// ran BEGIN), MariaDB says it in @@in_transaction; MySQL has no such variable (error 1193), and
// go-sql-driver/mysql keeps the OK packet's SERVER_STATUS_IN_TRANS to itself (the TypeScript
// client reads that flag). information_schema.INNODB_TRX needs the PROCESS privilege, and SET
// TRANSACTION, which fails inside a transaction, would fail on every good call. So on MySQL: a
// SAVEPOINT and its RELEASE. Inside a transaction (or under autocommit=0, whose statements commit
// together too) both succeed; outside, the server keeps no savepoint and the RELEASE fails with
// error 1305, on MySQL and MariaDB alike, with no privilege and nothing left behind.

const (
	errUnknownSystemVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	errSavepointDoesNotExist = 1305 // ER_SP_DOES_NOT_EXIST
)

// probeSavepoint is a name no application's own savepoint has (one of the same name would be
// replaced).
const probeSavepoint = "outbox_bridge_in_transaction"

func isMysqlError(err error, number uint16) bool {
	var e *mysql.MySQLError
	return errors.As(err, &e) && e.Number == number
}

func (p *Producer) inTransaction(ctx context.Context, tx TxRunner) (bool, error) {
	if _, ok := tx.(*sql.Tx); ok {
		return true, nil
	}
	// Once a server said it has no @@in_transaction, it is not asked again (an error in its log at
	// every call). The savepoint works on MariaDB too, should the handle be another server's.
	if atomic.LoadUint32(&p.noInTransaction) == 0 {
		open, err := queryInTransaction(ctx, tx)
		if !isMysqlError(err, errUnknownSystemVariable) {
			return open, err
		}
		atomic.StoreUint32(&p.noInTransaction, 1)
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+probeSavepoint); err != nil {
		return false, err
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+probeSavepoint)
	if isMysqlError(err, errSavepointDoesNotExist) {
		return false, nil
	}
	return err == nil, err
}

func queryInTransaction(ctx context.Context, tx TxRunner) (bool, error) {
	rows, err := tx.QueryContext(ctx, "SELECT @@in_transaction")
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var open int
	if !rows.Next() {
		return false, rows.Err()
	}
	if err := rows.Scan(&open); err != nil {
		return false, err
	}
	return open == 1, rows.Close()
}
