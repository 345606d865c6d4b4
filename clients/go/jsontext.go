package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSON values as a record's text (docs/consumers.md section 4): a number by its literal as
// written, a string unescaped, true/false, an object or array as its JSON text, null as nil —
// what the C++ side reads with simdjson's raw tokens (src/snapshot/document.cpp).

// Field is one field of a JSON object, in a record's terms.
type Field struct {
	Name    string
	Text    Value
	Numeric bool // written as a JSON number
}

// valueText reads one JSON value (as json.Decoder gave it: no space around it) as a record's text.
func valueText(raw json.RawMessage) (Value, bool, error) {
	if len(raw) == 0 {
		return nil, false, errors.New("no value")
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, err
		}
		return &s, false, nil
	case c == 'n':
		return nil, false, nil
	case c == '-' || (c >= '0' && c <= '9'):
		s := string(raw)
		return &s, true, nil
	default: // true, false, an object or an array: its text
		s := string(raw)
		return &s, false, nil
	}
}

// readFields reads the object that comes next from dec, its fields in order.
func readFields(dec *json.Decoder) ([]Field, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var fields []Field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		text, numeric, err := valueText(raw)
		if err != nil {
			return nil, err
		}
		fields = append(fields, Field{name, text, numeric})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	return fields, nil
}

// ParseRecord reads a message body as a record: the fields of one JSON object, in order.
func ParseRecord(body []byte) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	fields, err := readFields(dec)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, errors.New("not a JSON object (cut short)")
		}
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not a JSON object (text after the object)")
	}
	return fields, nil
}
