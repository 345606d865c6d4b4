package outbox

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// What the bridge refuses as poison (src/relay/poison.cpp, src/relay/row_headers.cpp), checked
// where the row is written so that a producer learns it at once, not from a halted source.

// KeyProblem says why key cannot be an entity key (the Outbox-Entity-Key header could not carry
// it); "" when it can.
func KeyProblem(key string) string {
	if key == "" {
		return "entity_key is empty"
	}
	if strings.HasPrefix(key, " ") || strings.HasPrefix(key, "\t") || strings.HasSuffix(key, " ") ||
		strings.HasSuffix(key, "\t") {
		return "entity_key begins or ends with a space or tab (NATS clients trim them)"
	}
	if hasControl(key) {
		return "entity_key holds a control character"
	}
	if !utf8.ValidString(key) {
		// A utf8mb4 column stores no such bytes: the key written would not be the key sent.
		return "entity_key is not valid UTF-8"
	}
	return ""
}

// hasControl: a byte 0x00-0x08, 0x0a-0x1f or 0x7f (a tab inside a value travels).
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// HeadersProblem says why headers cannot travel as message headers; "" when they can. An empty
// value adds no header.
func HeadersProblem(headers map[string]string) string {
	seen := map[string]bool{}
	for name, value := range headers {
		lower := strings.ToLower(name)
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return r >= 0x80 || !isTokenChar(byte(r)) }) >= 0 {
			return fmt.Sprintf("headers: '%s' is not a header name", name)
		}
		if strings.HasPrefix(lower, "nats-") || strings.HasPrefix(lower, "outbox-") || lower == "content-type" {
			return fmt.Sprintf("headers: '%s' is reserved (the bridge sets Nats-*, Outbox-* and Content-Type)", name)
		}
		if lower == "status" || lower == "description" {
			return fmt.Sprintf("headers: '%s' is reserved (NATS clients read it as a server status)", name)
		}
		if seen[lower] {
			return fmt.Sprintf("headers: '%s' is given twice", name)
		}
		seen[lower] = true
		if hasControl(value) {
			return fmt.Sprintf("headers: the value of '%s' holds a control character", name)
		}
		if !utf8.ValidString(value) {
			return fmt.Sprintf("headers: the value of '%s' is not valid UTF-8", name)
		}
		if strings.HasPrefix(value, " ") || strings.HasPrefix(value, "\t") || strings.HasSuffix(value, " ") ||
			strings.HasSuffix(value, "\t") {
			return fmt.Sprintf("headers: the value of '%s' begins or ends with a space or tab", name)
		}
	}
	return ""
}

// Rule is what docs/consumers.md section 3 says to do with a message.
type Rule int

const (
	RuleApply    Rule = iota // the next version: apply it
	RuleSkip                 // already reflected (a redelivery, or what the snapshot held)
	RuleNewEpoch             // the source was bumped: bootstrap again
	RuleGap                  // versions are missing: bootstrap again
)

// RuleFor is the rule for a message of epoch e and version v, given the replica's epoch and the
// version it applied last.
func RuleFor(epoch, applied, e, v uint64) Rule {
	switch {
	case e > epoch:
		return RuleNewEpoch
	case e < epoch || v <= applied:
		return RuleSkip
	case v != applied+1:
		return RuleGap
	}
	return RuleApply
}
