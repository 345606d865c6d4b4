package outbox

import (
	"database/sql"
	"testing"
)

func TestDecodeByFieldName(t *testing.T) {
	var a struct {
		ID      int64  `outbox:"id"`
		Name    string `json:"displayName"`
		Score   float64
		Code    string
		Missing *string
		Note    sql.NullString
		Tags    []string
		Active  bool
		skipped int
	}
	columns := []string{"id", "displayName", "score", "code", "missing", "note", "tags", "active", "other"}
	values := []Value{Text("42"), Text("Acme"), Text("1e3"), Text("000042"), nil, nil, Text(`["a","b"]`),
		Text("true"), Text("x")}
	if err := Decode(columns, values, &a); err != nil {
		t.Fatal(err)
	}
	if a.ID != 42 || a.Name != "Acme" || a.Score != 1000 || a.Code != "000042" || a.Missing != nil ||
		a.Note.Valid || len(a.Tags) != 2 || !a.Active || a.skipped != 0 {
		t.Fatalf("%+v", a)
	}
	// The record's text is untouched: the checksum hashes it, not what it decoded to.
	if *values[2] != "1e3" {
		t.Fatal("decoding changed the record")
	}
	var n struct{ ID int64 }
	if err := Decode([]string{"id"}, []Value{nil}, &n); err == nil {
		t.Fatal("NULL into an int64")
	}
	if err := Decode([]string{"id"}, []Value{Text("x")}, &n); err == nil {
		t.Fatal("'x' into an int64")
	}
	if err := Decode(nil, nil, n); err == nil {
		t.Fatal("not a pointer")
	}
}
