package outbox

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// Both stores by the same steps: a bootstrap committed (or aborted), changes applied with the row
// moved conditionally, and a change from a row another consumer moved refused, changing nothing.

type recordsKept struct{}

func (recordsKept) Reset(ctx context.Context, tx *sql.Tx, source string) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM replica WHERE source = ?", source)
	return err
}

func (recordsKept) Load(ctx context.Context, tx *sql.Tx, _ []string, batch []SnapshotRecord) error {
	for _, r := range batch {
		if _, err := tx.ExecContext(ctx, "INSERT INTO replica VALUES ('acc', ?, ?)", r.Key, *r.Values[1]); err != nil {
			return err
		}
	}
	return nil
}

func (recordsKept) Apply(ctx context.Context, tx *sql.Tx, c *Change) error {
	var err error
	if c.Values == nil {
		_, err = tx.ExecContext(ctx, "DELETE FROM replica WHERE source = ? AND id = ?", c.Source, c.Key)
	} else {
		_, err = tx.ExecContext(ctx, "REPLACE INTO replica VALUES (?, ?, ?)", c.Source, c.Key, *c.Values[1])
	}
	return err
}

func exerciseStore(t *testing.T, store Store, records func() string) {
	ctx := context.Background()
	if row, err := store.Load(ctx, "acc"); err != nil || row != nil {
		t.Fatalf("before a bootstrap: %+v, %v", row, err)
	}
	snapshot := []SnapshotRecord{{"1", []Value{Text("1"), Text("One")}}, {"2", []Value{Text("2"), Text("Two")}}}
	var sum uint64
	for _, r := range snapshot {
		sum += RecordHash(r.Values)
	}
	row := InboxRow{Epoch: 1, AppliedVersion: 5, StreamName: "CONTROL_ACC", StreamSeq: 7, Key: "id",
		Columns: []string{"id", "name"}, Numeric: []bool{true, false}, Sum: sum, RecordCount: 2}
	// An aborted bootstrap leaves nothing.
	b, err := store.BeginBootstrap(ctx, "acc", nil)
	if err != nil || b.Records(ctx, row.Columns, snapshot) != nil || b.Abort(ctx) != nil {
		t.Fatalf("aborted bootstrap: %v", err)
	}
	if got, err := store.Load(ctx, "acc"); err != nil || got != nil {
		t.Fatalf("after an abort: %+v, %v", got, err)
	}
	b, err = store.BeginBootstrap(ctx, "acc", nil)
	if err != nil || b.Records(ctx, row.Columns, snapshot) != nil {
		t.Fatal(err)
	}
	stored, err := b.Commit(ctx, row)
	if err != nil || stored.Generation != 1 {
		t.Fatalf("%+v, %v", stored, err)
	}
	loaded, err := store.Load(ctx, "acc")
	if err != nil || loaded == nil || loaded.Sum != sum || loaded.StreamSeq != 7 || loaded.Generation != 1 ||
		strings.Join(loaded.Columns, ",") != "id,name" || !loaded.Numeric[0] || loaded.Numeric[1] {
		t.Fatalf("loaded %+v, %v", loaded, err)
	}
	// Version 6 updates 2, version 7 deletes 1, version 8 adds 3.
	from := *loaded
	for _, c := range []*Change{
		{Source: "acc", Epoch: 1, Version: 6, StreamSeq: 8, Key: "2", Values: []Value{Text("2"), Text("Deux")}},
		{Source: "acc", Epoch: 1, Version: 7, StreamSeq: 9, Key: "1", Delete: true},
		{Source: "acc", Epoch: 1, Version: 8, StreamSeq: 10, Key: "3", Values: []Value{Text("3"), Text("Three")}},
	} {
		next, err := store.Apply(ctx, c, from)
		if err != nil || next == nil || next.AppliedVersion != c.Version || next.StreamSeq != c.StreamSeq {
			t.Fatalf("version %d: %+v, %v", c.Version, next, err)
		}
		from = *next
	}
	want := RecordHash([]Value{Text("2"), Text("Deux")}) + RecordHash([]Value{Text("3"), Text("Three")})
	if from.Sum != want || from.RecordCount != 2 {
		t.Fatalf("checksum %s over %d records, want %s over 2", FormatChecksum(from.Sum), from.RecordCount,
			FormatChecksum(want))
	}
	if got := records(); got != "2=Deux 3=Three" {
		t.Fatalf("records %q", got)
	}
	// From a row that is no longer the stored one (the version another consumer moved past):
	// nothing changes.
	stale := from
	stale.AppliedVersion = 7
	next, err := store.Apply(ctx, &Change{Source: "acc", Epoch: 1, Version: 8, StreamSeq: 10, Key: "9",
		Values: []Value{Text("9"), Text("Nine")}}, stale)
	if err != nil || next != nil {
		t.Fatalf("from a moved row: %+v, %v", next, err)
	}
	if got := records(); got != "2=Deux 3=Three" {
		t.Fatalf("records after a refused change %q", got)
	}
	again, err := store.Load(ctx, "acc")
	if err != nil || again.AppliedVersion != 8 || again.Sum != want {
		t.Fatalf("row after a refused change %+v, %v", again, err)
	}
	// A second bootstrap moves the generation: a change from the first one's row is refused.
	b, _ = store.BeginBootstrap(ctx, "acc", nil)
	if second, err := b.Commit(ctx, row); err != nil || second.Generation != 2 {
		t.Fatalf("%+v, %v", second, err)
	}
	if next, err := store.Apply(ctx, &Change{Source: "acc", Epoch: 1, Version: 6, Key: "1"}, *loaded); err != nil || next != nil {
		t.Fatalf("from the first generation: %+v, %v", next, err)
	}
}

func TestMemoryStore(t *testing.T) {
	m := NewMemoryStore()
	exerciseStore(t, m, func() string {
		var out []string
		recs := m.Records("acc")
		for _, k := range sortedKeys(recs) {
			out = append(out, k+"="+*recs[k][1])
		}
		return strings.Join(out, " ")
	})
}

func TestMysqlInbox(t *testing.T) {
	db := testDB(t)
	mustExec(t, db, "CREATE TABLE replica (source VARCHAR(64), id VARCHAR(64), name TEXT, PRIMARY KEY (source, id))")
	inbox, err := NewMysqlInbox(db, recordsKept{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	exerciseStore(t, inbox, func() string {
		rows, err := db.Query("SELECT CONCAT(id, '=', name) FROM replica ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			out = append(out, s)
		}
		return strings.Join(out, " ")
	})
	// The row as the TypeScript MysqlInbox writes it: columns_json by JSON.stringify, the
	// checksum as 16 hex digits.
	var columns, checksum string
	if err := db.QueryRow("SELECT columns_json, checksum FROM outbox_inbox WHERE source = 'acc'").Scan(&columns,
		&checksum); err != nil || columns != `{"columns":["id","name"],"numeric":[true,false]}` || len(checksum) != 16 {
		t.Fatalf("%s %s %v", columns, checksum, err)
	}
	if _, err := NewMysqlInbox(db, recordsKept{}, "a;b", ""); err == nil {
		t.Fatal("a table name that is no identifier")
	}
}

func TestDumpJSON(t *testing.T) {
	row := &InboxRow{Epoch: 2, AppliedVersion: 9, Key: "id", Columns: []string{"id", "name"},
		Numeric: []bool{true, false}, Sum: 0xab}
	got := DumpJSON("acc", row, map[string][]Value{
		"10": {Text("10"), Text("quote \" tab \t ctl \x01 é <&>")}, "9": {Text("9"), nil}})
	want := `{"source":"acc","sourceEpoch":2,"appliedVersion":9,"key":"id","records":[` +
		`{"id":10,"name":"quote \" tab \t ctl \u0001 é <&>"},{"id":9,"name":null}],"recordCount":2,` +
		`"checksum":"sha256-sum64:00000000000000ab"}`
	if got != want {
		t.Fatalf("\n%s\nwant\n%s", got, want)
	}
}

// A row whose numeric flags are fewer than its columns (a malformed columns_json) is an error, not
// a panic.
func TestDumpWriterRefusesColumnsWithoutNumericFlags(t *testing.T) {
	row := &InboxRow{Key: "id", Columns: []string{"id", "name"}, Numeric: []bool{true}}
	var b strings.Builder
	d := NewDumpWriter(&b, "acc", row)
	if err := d.Record([]Value{Text("1"), Text("Acme")}); err == nil {
		t.Fatalf("wrote %s", b.String())
	}
}
