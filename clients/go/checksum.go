package outbox

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
)

// The snapshot checksum (docs/consumers.md section 4): order-independent, kept current change by
// change. A record is its values in the snapshot's column order, each a value's text or nil
// (NULL).

// Value is one field of a record: its text (a number's literal as written, a string unescaped),
// or nil for NULL.
type Value = *string

// Text is a Value holding s.
func Text(s string) Value { return &s }

// Canonical is the record's canonical bytes: per value 0x00 for NULL, else 0x01, the length as
// 4-byte big-endian, then the bytes.
func Canonical(record []Value) []byte {
	n := 0
	for _, v := range record {
		n++
		if v != nil {
			n += 4 + len(*v)
		}
	}
	out := make([]byte, 0, n)
	for _, v := range record {
		if v == nil {
			out = append(out, 0)
			continue
		}
		out = append(out, 1)
		out = binary.BigEndian.AppendUint32(out, uint32(len(*v)))
		out = append(out, *v...)
	}
	return out
}

// RecordHash is h(record): the first 8 bytes of SHA-256(Canonical(record)) as a big-endian
// unsigned 64-bit number.
func RecordHash(record []Value) uint64 {
	sum := sha256.Sum256(Canonical(record))
	return binary.BigEndian.Uint64(sum[:8])
}

// FormatChecksum is a sum of record hashes as the bridge writes it.
func FormatChecksum(sum uint64) string { return fmt.Sprintf("sha256-sum64:%016x", sum) }

var checksumForm = regexp.MustCompile(`^sha256-sum64:([0-9a-f]{16})$`)

// ParseChecksum reads "sha256-sum64:<16 lower-case hex digits>".
func ParseChecksum(text string) (uint64, bool) {
	m := checksumForm.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(m[1], 16, 64)
	return n, err == nil
}
