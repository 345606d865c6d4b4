package outbox

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// `--dump`: the replica as `outbox-bridge replica --dump` writes it (src/replica/replica.cpp,
// Replica::dumpJson), for comparing a consumer with the database.

// AppendJSONString writes s as a JSON string as the bridge does (src/common/json.cpp): '"', '\\'
// and control characters escaped, other bytes as they are, invalid UTF-8 as \ufffd.
func AppendJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		}
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
		i++
	}
	b.WriteByte('"')
}

// DumpJSON is the replica of source, its row and records, as `outbox-bridge replica --dump`
// writes it: snapshot-shaped JSON, records in the byte order of their keys.
func DumpJSON(source string, row *InboxRow, records map[string][]Value) string {
	var b strings.Builder
	d := NewDumpWriter(&b, source, row)
	for _, key := range sortedKeys(records) {
		_ = d.Record(records[key])
	}
	_ = d.Close()
	return b.String()
}

// DumpWriter writes a --dump record by record (a replica of millions needs the memory of one):
// the caller hands them in the byte order of their keys.
type DumpWriter struct {
	w     io.Writer
	row   InboxRow
	count uint64
	err   error
}

// NewDumpWriter begins the dump of source's replica at row (nil: nothing bootstrapped) on w.
func NewDumpWriter(w io.Writer, source string, row *InboxRow) *DumpWriter {
	d := &DumpWriter{w: w}
	if row != nil {
		d.row = *row
	}
	var b strings.Builder
	b.WriteString(`{"source":`)
	AppendJSONString(&b, source)
	fmt.Fprintf(&b, `,"sourceEpoch":%d,"appliedVersion":%d,"key":`, d.row.Epoch, d.row.AppliedVersion)
	AppendJSONString(&b, d.row.Key)
	b.WriteString(`,"records":[`)
	d.write(b.String())
	return d
}

func (d *DumpWriter) write(s string) {
	if d.err == nil {
		_, d.err = io.WriteString(d.w, s)
	}
}

// Record writes one record, its values in the row's column order.
func (d *DumpWriter) Record(values []Value) error {
	var b strings.Builder
	if d.count > 0 {
		b.WriteByte(',')
	}
	if len(d.row.Numeric) < len(d.row.Columns) {
		return fmt.Errorf("dump: %d columns but %d numeric flags (a malformed columns_json)", len(d.row.Columns),
			len(d.row.Numeric))
	}
	d.count++
	b.WriteByte('{')
	for i := 0; i < len(d.row.Columns) && i < len(values); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		AppendJSONString(&b, d.row.Columns[i])
		b.WriteByte(':')
		switch v := values[i]; {
		case v == nil:
			b.WriteString("null")
		case d.row.Numeric[i]:
			b.WriteString(*v)
		default:
			AppendJSONString(&b, *v)
		}
	}
	b.WriteByte('}')
	d.write(b.String())
	return d.err
}

// Close ends the dump with the count of the records written and the row's checksum.
func (d *DumpWriter) Close() error {
	d.write(fmt.Sprintf(`],"recordCount":%d,"checksum":"%s"}`, d.count, FormatChecksum(d.row.Sum)))
	return d.err
}
