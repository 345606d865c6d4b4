package outbox

import (
	"fmt"
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
	var r InboxRow
	if row != nil {
		r = *row
	}
	var b strings.Builder
	b.WriteString(`{"source":`)
	AppendJSONString(&b, source)
	fmt.Fprintf(&b, `,"sourceEpoch":%d,"appliedVersion":%d,"key":`, r.Epoch, r.AppliedVersion)
	AppendJSONString(&b, r.Key)
	b.WriteString(`,"records":[`)
	for n, key := range sortedKeys(records) {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		values := records[key]
		for i := 0; i < len(r.Columns) && i < len(values); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			AppendJSONString(&b, r.Columns[i])
			b.WriteByte(':')
			switch v := values[i]; {
			case v == nil:
				b.WriteString("null")
			case r.Numeric[i]:
				b.WriteString(*v)
			default:
				AppendJSONString(&b, *v)
			}
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(&b, `],"recordCount":%d,"checksum":"%s"}`, len(records), FormatChecksum(r.Sum))
	return b.String()
}
