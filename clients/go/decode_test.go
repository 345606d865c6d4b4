package outbox

import (
	"database/sql"
	"fmt"
	"testing"
	"time"
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

// Dates and times as the snapshot carries them (the server's text: DATETIME "2024-01-02
// 10:00:00", DATE, fractions of a second) and as a change's payload may (JSON_OBJECT's text on
// MariaDB, MySQL's six fraction digits, RFC 3339 with a zone); and an `any` field from a string
// that is no JSON. A Decode error in an InboxHandler stops the replica.
func TestDecodeDatesTimesAndAny(t *testing.T) {
	var a struct {
		Created time.Time
		Day     time.Time
		Stamp   time.Time
		MySQL   time.Time
		Zoned   time.Time
		Zero    time.Time
		Updated sql.NullTime
		Deleted sql.NullTime
		Seen    *time.Time
		Name    any
		Tags    any
		Count   any
		Nothing any
	}
	columns := []string{"created", "day", "stamp", "mysql", "zoned", "zero", "updated", "deleted", "seen", "name",
		"tags", "count", "nothing"}
	values := []Value{Text("2024-01-02 10:00:00"), Text("2024-01-02"), Text("2024-01-02 10:00:00.25"),
		Text("2024-01-02 10:00:00.000000"), Text("2024-01-02T10:00:00+02:00"), Text("0000-00-00 00:00:00"),
		Text("2024-01-02 10:00:00.123456"), nil, Text("2024-01-02 10:00:00"), Text("Acme"), Text(`["a"]`),
		Text("42"), nil}
	if err := Decode(columns, values, &a); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 1, 2, 10, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct{ got, want time.Time }{
		"created": {a.Created, at},
		"day":     {a.Day, time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)},
		"stamp":   {a.Stamp, at.Add(250 * time.Millisecond)},
		"mysql":   {a.MySQL, at},
		"zoned":   {a.Zoned, at.Add(-2 * time.Hour)},
		"updated": {a.Updated.Time, at.Add(123456 * time.Microsecond)},
		"seen":    {*a.Seen, at},
	} {
		if !c.got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
	if a.Created.Location() != time.UTC || !a.Zero.IsZero() || !a.Updated.Valid || a.Deleted.Valid {
		t.Errorf("%+v", a)
	}
	if a.Name != "Acme" || fmt.Sprint(a.Tags) != "[a]" || a.Count != float64(42) || a.Nothing != nil {
		t.Errorf("name %#v, tags %#v, count %#v, nothing %#v", a.Name, a.Tags, a.Count, a.Nothing)
	}
	var bad struct{ At time.Time }
	for _, text := range []string{"2024-13-02 10:00:00", "yesterday", "2024-01-02 25:00:00"} {
		if err := Decode([]string{"at"}, []Value{Text(text)}, &bad); err == nil {
			t.Errorf("%q into a time.Time: %v", text, bad.At)
		}
	}
}
