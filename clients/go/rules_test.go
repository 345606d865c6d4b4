package outbox

import (
	"strings"
	"testing"
)

// docs/consumers.md section 3, for a replica at epoch 2 that applied version 10.
func TestRules(t *testing.T) {
	for _, c := range []struct {
		e, v uint64
		want Rule
	}{
		{2, 11, RuleApply},
		{2, 10, RuleSkip}, {2, 1, RuleSkip}, // a redelivery, or what the snapshot held
		{1, 11, RuleSkip}, {1, 50, RuleSkip}, // an older epoch: already reflected
		{3, 11, RuleNewEpoch}, {3, 5, RuleNewEpoch}, // bumped: whatever the version
		{2, 12, RuleGap}, {2, 1000, RuleGap},
	} {
		if got := RuleFor(2, 10, c.e, c.v); got != c.want {
			t.Errorf("epoch %d version %d: rule %d, want %d", c.e, c.v, got, c.want)
		}
	}
}

func TestKeyProblems(t *testing.T) {
	for key, want := range map[string]string{
		"account-42": "", "ключ": "", "a b": "", "a\tb": "",
		"": "empty", " a": "space or tab", "a\t": "space or tab", "a\nb": "control character",
		"a\x00b": "control character", "a\x7fb": "control character", "a\xffb": "not valid UTF-8",
	} {
		got := KeyProblem(key)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("KeyProblem(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestHeadersProblems(t *testing.T) {
	for _, c := range []struct {
		headers map[string]string
		want    string
	}{
		{map[string]string{"traceparent": "00-abc-01", "tracestate": ""}, ""},
		{map[string]string{"trace parent": "x"}, "is not a header name"},
		{map[string]string{"Nats-Msg-Id": "x"}, "reserved"},
		{map[string]string{"outbox-version": "x"}, "reserved"},
		{map[string]string{"Content-Type": "x"}, "reserved"},
		{map[string]string{"Status": "x"}, "server status"},
		{map[string]string{"a": "x", "A": "y"}, "given twice"},
		{map[string]string{"a": "x\r\ny"}, "control character"},
		{map[string]string{"a": " x"}, "space or tab"},
		{map[string]string{"a": "\xff"}, "not valid UTF-8"},
		{map[string]string{"ключ": "x"}, "is not a header name"},
	} {
		got := HeadersProblem(c.headers)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("HeadersProblem(%v) = %q, want %q", c.headers, got, c.want)
		}
	}
}
