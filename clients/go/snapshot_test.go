package outbox

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A snapshot as the bridge writes it, with what a record's text must keep: a number's literal
// (1e3, -0.5, 18446744073709551615), escapes, UTF-8, NULL, a ZEROFILL column's string.
func snapshotDoc(records []string, count int, checksum string) string {
	return `{"schemaVersion":1,"source":"account","sourceEpoch":2,"watermark":1234,` +
		`"stream":{"name":"CONTROL_ACCOUNT","seq":5678},"key":"id","records":[` + strings.Join(records, ",") +
		fmt.Sprintf(`],"recordCount":%d,"checksum":"%s"}`, count, checksum)
}

var testRecords = []string{
	`{"id":42,"displayName":"Acme","score":1e3,"code":"000042"}`,
	`{"id":18446744073709551615,"displayName":"quote \" back \\ \u00e9 \ud83d\ude00 Zürich","score":-0.5,"code":null}`,
	` { "id" : 7 , "displayName" : "" , "score" : 0 , "code" : "x" } `,
}

func testValues() [][]Value {
	return [][]Value{
		{Text("42"), Text("Acme"), Text("1e3"), Text("000042")},
		{Text("18446744073709551615"), Text("quote \" back \\ é 😀 Zürich"), Text("-0.5"), nil},
		{Text("7"), Text(""), Text("0"), Text("x")},
	}
}

func testDoc() string {
	var sum uint64
	for _, v := range testValues() {
		sum += RecordHash(v)
	}
	return snapshotDoc(testRecords, 3, FormatChecksum(sum))
}

// twoReads gives text in two reads, split at `at`.
type twoReads struct {
	parts []string
}

func (r *twoReads) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && r.parts[0] == "" {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

func read(t *testing.T, body io.Reader, batchSize int) (*SnapshotSummary, []SnapshotRecord, error) {
	t.Helper()
	var got []SnapshotRecord
	s, err := ReadSnapshot(body, func(h *SnapshotHeader, columns []string, batch []SnapshotRecord) error {
		if h.Key != "id" || len(columns) != 4 || len(batch) > batchSize {
			t.Fatalf("batch of %d with header %+v, columns %v", len(batch), h, columns)
		}
		got = append(got, batch...)
		return nil
	}, true, batchSize)
	return s, got, err
}

func requireRecords(t *testing.T, what string, got []SnapshotRecord) {
	t.Helper()
	want := testValues()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records", what, len(got))
	}
	for i, r := range got {
		if r.Key != *want[i][0] {
			t.Fatalf("%s: record %d key %q", what, i, r.Key)
		}
		for j, v := range r.Values {
			if (v == nil) != (want[i][j] == nil) || (v != nil && *v != *want[i][j]) {
				t.Fatalf("%s: record %d value %d = %v, want %v", what, i, j, v, want[i][j])
			}
		}
	}
}

func TestSnapshotSplitAtEveryByte(t *testing.T) {
	doc := testDoc()
	for at := 0; at <= len(doc); at++ {
		s, records, err := read(t, &twoReads{[]string{doc[:at], doc[at:]}}, 2)
		if err != nil {
			t.Fatalf("split at %d: %v", at, err)
		}
		requireRecords(t, fmt.Sprintf("split at %d", at), records)
		if s.Epoch != 2 || s.Watermark != 1234 || s.StreamName != "CONTROL_ACCOUNT" || s.StreamSeq != 5678 ||
			s.RecordCount != 3 || strings.Join(s.Columns, ",") != "id,displayName,score,code" ||
			fmt.Sprint(s.Numeric) != "[true false true false]" {
			t.Fatalf("split at %d: %+v", at, s)
		}
	}
	// And a byte at a time.
	_, records, err := read(t, iotest.OneByteReader(strings.NewReader(doc)), 1)
	if err != nil {
		t.Fatal(err)
	}
	requireRecords(t, "one byte at a time", records)
}

func TestSnapshotCutShortAtEveryByteIsRejected(t *testing.T) {
	doc := testDoc()
	for at := 0; at < len(doc); at++ {
		_, _, err := read(t, strings.NewReader(doc[:at]), 1000)
		var rejected *SnapshotRejected
		if !errors.As(err, &rejected) {
			t.Fatalf("cut at %d: %v", at, err)
		}
	}
}

func TestSnapshotThatDoesNotCheckOutIsRejected(t *testing.T) {
	var sum uint64
	for _, v := range testValues() {
		sum += RecordHash(v)
	}
	good := FormatChecksum(sum)
	for _, c := range []struct{ doc, why string }{
		{snapshotDoc(testRecords, 4, good), "recordCount says 4 but 3 records came"},
		{snapshotDoc(testRecords, 3, FormatChecksum(sum+1)), "checksum says"},
		{snapshotDoc(testRecords, 3, "sha256-sum64:XYZ"), "bad checksum"},
		{snapshotDoc(append([]string{`{"id":1,"other":2,"score":3,"code":4}`}, testRecords[1:]...), 3, good),
			"fields other than the first record's"},
		{snapshotDoc([]string{`{"name":"x"}`}, 1, good), "snapshot key 'id' is not a field of its records"},
		{`{"sourceEpoch":1,"records":[]}`, "snapshot lacks sourceEpoch, watermark, stream or key before its records"},
		{testDoc() + "x", "text after the snapshot"},
		{strings.Replace(testDoc(), `"schemaVersion":1`, `"schemaVersion":2`, 1), "unsupported schemaVersion"},
		{strings.Replace(testDoc(), `"watermark":1234`, `"watermark":-1`, 1), "watermark is not a whole number"},
		{strings.Replace(testDoc(), `"score":1e3`, `"score":1e`, 1), "malformed snapshot"},
	} {
		_, _, err := read(t, strings.NewReader(c.doc), 1000)
		var rejected *SnapshotRejected
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: got %v", c.why, err)
		}
	}
}

func TestSummaryHasNoRecordsToCheck(t *testing.T) {
	doc := `{"schemaVersion":1,"source":"account","sourceEpoch":1,"watermark":9,"stream":{"name":"S","seq":0},` +
		`"key":"id","recordCount":2,"checksum":"sha256-sum64:00ab12cd34ef5678"}`
	s, err := ReadSnapshot(strings.NewReader(doc), nil, false, 0)
	if err != nil || s.Watermark != 9 || s.RecordCount != 2 || s.Sum != 0x00ab12cd34ef5678 {
		t.Fatalf("%+v, %v", s, err)
	}
	if _, err := ReadSnapshot(strings.NewReader(doc), nil, true, 0); err == nil {
		t.Fatal("a summary taken as a snapshot")
	}
}

// A store that fails: its error, not a rejected snapshot, and the read ends there.
func TestSnapshotStoreErrorPassesThrough(t *testing.T) {
	failure := errors.New("disk full")
	_, err := ReadSnapshot(strings.NewReader(testDoc()), func(*SnapshotHeader, []string, []SnapshotRecord) error {
		return failure
	}, true, 1)
	if err != failure {
		t.Fatalf("got %v", err)
	}
}

func TestParseRecord(t *testing.T) {
	fields, err := ParseRecord([]byte(`{"id":1e3,"name":"a\nb","flag":true,"nested":{"a": [1, 2]},"none":null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"id=1e3 true", "name=a\nb false", "flag=true false", `nested={"a": [1, 2]} false`, "none=<nil> false"}
	for i, f := range fields {
		text := "<nil>"
		if f.Text != nil {
			text = *f.Text
		}
		if got := fmt.Sprintf("%s=%s %v", f.Name, text, f.Numeric); got != want[i] {
			t.Errorf("field %d: %s, want %s", i, got, want[i])
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":1`, `{"a":1} x`, `"text"`} {
		if _, err := ParseRecord([]byte(bad)); err == nil {
			t.Errorf("ParseRecord(%q) took it", bad)
		}
	}
}
