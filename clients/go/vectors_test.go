package outbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The shared vectors (tests/vectors, docs/consumers.md sections 1 and 4): the checksum's record
// sets, and the subject escaping and partition examples the consumer contract gives.

// vectorsDir: tests/vectors of the checkout (run-tests.sh runs a copy of the module elsewhere and
// names it by OUTBOX_REPO).
func vectorsDir(t *testing.T) string {
	root := os.Getenv("OUTBOX_REPO")
	if root == "" {
		root = filepath.Join("..", "..")
	}
	dir := filepath.Join(root, "tests", "vectors")
	if _, err := os.Stat(filepath.Join(dir, "checksum_vectors.json")); err != nil {
		t.Fatalf("the shared vectors are not at %s (set OUTBOX_REPO to the checkout): %v", dir, err)
	}
	return dir
}

func TestChecksumVectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(vectorsDir(t), "checksum_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors struct {
		Sets map[string]struct {
			Records  [][]*string
			Hashes   []string
			Checksum string
		}
	}
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors.Sets) < 7 {
		t.Fatalf("only %d sets", len(vectors.Sets))
	}
	for name, set := range vectors.Sets {
		var sum uint64
		for i, record := range set.Records {
			h := RecordHash(record)
			if got := hex16(h); got != set.Hashes[i] {
				t.Errorf("%s record %d: hash %s, want %s", name, i, got, set.Hashes[i])
			}
			sum += h
		}
		if got := FormatChecksum(sum); got != set.Checksum {
			t.Errorf("%s: checksum %s, want %s", name, got, set.Checksum)
		}
		want, ok := ParseChecksum(set.Checksum)
		if !ok || want != sum {
			t.Errorf("%s: ParseChecksum(%q) = %x, %v", name, set.Checksum, want, ok)
		}
		// Kept change by change: removing every record again gives the empty set's sum.
		for _, record := range set.Records {
			sum -= RecordHash(record)
		}
		if sum != 0 {
			t.Errorf("%s: %x left after removing every record", name, sum)
		}
	}
}

func TestChecksumForms(t *testing.T) {
	for _, bad := range []string{"", "sha256-sum64:", "sha256-sum64:00AB12CD34EF5678", "sha256-sum64:0ab12cd34ef5678",
		"sha256-sum64:00ab12cd34ef56789", "md5:00ab12cd34ef5678"} {
		if _, ok := ParseChecksum(bad); ok {
			t.Errorf("ParseChecksum(%q) took it", bad)
		}
	}
	// The canonical form: NULL is one 0x00; a value 0x01, its length big-endian, its bytes.
	got := Canonical([]Value{nil, Text(""), Text("ab")})
	want := []byte{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 2, 'a', 'b'}
	if string(got) != string(want) {
		t.Errorf("Canonical = %v, want %v", got, want)
	}
}

func TestSubjectEscaping(t *testing.T) {
	for _, c := range []struct{ key, token string }{
		{"a.b", "a%2Eb"}, {"50%", "50%25"}, {"a b", "a%20b"}, {"ключ", "ключ"}, {"", "%"},
		{"*>", "%2A%3E"}, {"\x00\x7f\t", "%00%7F%09"}, {"account-42", "account-42"},
	} {
		if got := EscapeSubjectToken(c.key); got != c.token {
			t.Errorf("EscapeSubjectToken(%q) = %q, want %q", c.key, got, c.token)
		}
		if got, ok := UnescapeSubjectToken(c.token); !ok || got != c.key {
			t.Errorf("UnescapeSubjectToken(%q) = %q, %v, want %q", c.token, got, ok, c.key)
		}
	}
	// Every byte goes there and back.
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if got, ok := UnescapeSubjectToken(EscapeSubjectToken(string(all))); !ok || got != string(all) {
		t.Errorf("the 256 bytes did not come back")
	}
	// No key escapes to these: a lone or short escape, lower-case hex, an escaped byte that needs
	// none, a byte that needs one.
	for _, bad := range []string{"", "a%", "a%2", "%2e", "%41", "a.b", "a b", "%zz"} {
		if got, ok := UnescapeSubjectToken(bad); ok {
			t.Errorf("UnescapeSubjectToken(%q) = %q, want none", bad, got)
		}
	}
}

func TestPartitionVectors(t *testing.T) {
	for _, c := range []struct {
		key  string
		hash uint32
	}{{"", 0x811c9dc5}, {"a", 0xe40c292c}, {"foobar", 0xbf9cf968}} {
		if got := Fnv1a32(c.key); got != c.hash {
			t.Errorf("Fnv1a32(%q) = %#x, want %#x", c.key, got, c.hash)
		}
	}
	for _, c := range []struct {
		key       string
		partition uint32
	}{{"account-42", 5}, {"foobar", 0}, {"ключ", 1}} {
		if got := KeyPartition(c.key, 8); got != c.partition {
			t.Errorf("KeyPartition(%q, 8) = %d, want %d", c.key, got, c.partition)
		}
	}
}
