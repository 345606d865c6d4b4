// Package outbox is the Go client of outbox-bridge: a producer that writes the outbox row inside
// the caller's transaction, and a Replica that bootstraps from the snapshot and follows the
// stream by the rules of docs/consumers.md, with its inbox in memory or in MySQL.
package outbox

import "strings"

// Subjects as the bridge makes them (docs/consumers.md section 1): the escaping of an entity key
// into one subject token, its reverse, and the partition hash of {partition:N}.

const upperHex = "0123456789ABCDEF"

func mustEscape(b byte) bool {
	return b <= 0x20 || b == 0x7f || b == '.' || b == '*' || b == '>' || b == '%'
}

// EscapeSubjectToken is the token the bridge puts in a subject for key: each byte 0x00-0x20,
// 0x7f, '.', '*', '>' and '%' as '%' and two upper-case hex digits, other bytes as they are; the
// empty key as "%".
func EscapeSubjectToken(key string) string {
	if key == "" {
		return "%"
	}
	var out strings.Builder
	for i := 0; i < len(key); i++ {
		b := key[i]
		if mustEscape(b) {
			out.WriteByte('%')
			out.WriteByte(upperHex[b>>4])
			out.WriteByte(upperHex[b&0xf])
		} else {
			out.WriteByte(b)
		}
	}
	return out.String()
}

// UnescapeSubjectToken is the key EscapeSubjectToken made token from; ok is false when no key
// escapes to it.
func UnescapeSubjectToken(token string) (key string, ok bool) {
	if token == "%" {
		return "", true
	}
	if token == "" {
		return "", false
	}
	var out strings.Builder
	for i := 0; i < len(token); i++ {
		b := token[i]
		if b != '%' {
			if mustEscape(b) {
				return "", false
			}
			out.WriteByte(b)
			continue
		}
		if i+2 >= len(token) {
			return "", false
		}
		high := strings.IndexByte(upperHex, token[i+1])
		low := strings.IndexByte(upperHex, token[i+2])
		if high < 0 || low < 0 {
			return "", false
		}
		decoded := byte(high*16 + low)
		if !mustEscape(decoded) {
			return "", false
		}
		out.WriteByte(decoded)
		i += 2
	}
	return out.String(), true
}

// Fnv1a32 is FNV-1a, 32 bits, over the bytes of key.
func Fnv1a32(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return h
}

// KeyPartition is the partition of {partition:N} the bridge puts key in (partitions ≥ 1).
func KeyPartition(key string, partitions uint32) uint32 {
	if partitions == 0 {
		panic("outbox: partitions must be at least 1")
	}
	return Fnv1a32(key) % partitions
}
