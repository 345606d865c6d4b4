package outbox

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Records into the application's types: each field of a struct takes the record's value of the
// same name (its `outbox:"name"` tag, else its `json:"name"` tag, else its Go name, compared
// without case). The record itself keeps the values' text: that is what the checksum hashes
// (docs/consumers.md section 4), so decoding never changes what is verified.

// Decode sets the fields of the struct out points to from a record: values in columns' order, as
// a Change or a SnapshotRecord holds them. A NULL sets a pointer, slice, map, interface or
// sql.Scanner field to its zero (nil; sql.NullTime not Valid) and is an error for any other; a
// record field the struct lacks is skipped. What each kind takes: README, "Decode".
func Decode(columns []string, values []Value, out any) error {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("outbox.Decode: %T is not a pointer to a struct", out)
	}
	s := v.Elem()
	byName := map[string]int{}
	for i := 0; i < s.NumField(); i++ {
		f := s.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("outbox"); ok {
			name, _, _ = strings.Cut(tag, ",")
		} else if tag, ok := f.Tag.Lookup("json"); ok {
			if n, _, _ := strings.Cut(tag, ","); n != "" {
				name = n
			}
		}
		if name != "-" {
			byName[strings.ToLower(name)] = i
		}
	}
	for i, column := range columns {
		index, ok := byName[strings.ToLower(column)]
		if !ok || i >= len(values) {
			continue
		}
		if err := setField(s.Field(index), values[i]); err != nil {
			return fmt.Errorf("outbox.Decode: field %s: %w", column, err)
		}
	}
	return nil
}

var (
	scannerType  = reflect.TypeOf((*sql.Scanner)(nil)).Elem()
	timeType     = reflect.TypeOf(time.Time{})
	nullTimeType = reflect.TypeOf(sql.NullTime{})
)

func setField(f reflect.Value, value Value) error {
	switch {
	case f.Type() == timeType && value != nil:
		t, err := ParseTime(*value)
		if err == nil {
			f.Set(reflect.ValueOf(t))
		}
		return err
	case f.Type() == nullTimeType: // its Scan takes no string
		n := sql.NullTime{}
		if value != nil {
			t, err := ParseTime(*value)
			if err != nil {
				return err
			}
			n = sql.NullTime{Time: t, Valid: true}
		}
		f.Set(reflect.ValueOf(n))
		return nil
	}
	if f.CanAddr() && f.Addr().Type().Implements(scannerType) {
		var src any
		if value != nil {
			src = *value
		}
		return f.Addr().Interface().(sql.Scanner).Scan(src)
	}
	if value == nil {
		switch f.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			f.Set(reflect.Zero(f.Type()))
			return nil
		}
		return fmt.Errorf("NULL into %s", f.Type())
	}
	text := *value
	if f.Type() == reflect.TypeOf(json.RawMessage(nil)) {
		f.SetBytes([]byte(text))
		return nil
	}
	switch f.Kind() {
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		if err := setField(p.Elem(), value); err != nil {
			return err
		}
		f.Set(p)
	case reflect.String:
		f.SetString(text)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, f.Type().Bits())
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(text, 10, f.Type().Bits())
		if err != nil {
			return err
		}
		f.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(text, f.Type().Bits())
		if err != nil {
			return err
		}
		f.SetFloat(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Uint8 {
			f.SetBytes([]byte(text))
			return nil
		}
		return json.Unmarshal([]byte(text), f.Addr().Interface())
	case reflect.Interface:
		// The JSON value the text is (an object, an array, a number as float64, true); a text that
		// is none, the string itself. A record's string "42" is a number here: name the type to
		// keep it a string.
		var v any
		if f.NumMethod() > 0 || json.Unmarshal([]byte(text), &v) != nil {
			v = text
		}
		if !reflect.TypeOf(v).AssignableTo(f.Type()) {
			return fmt.Errorf("cannot hold %T in %s", v, f.Type())
		}
		f.Set(reflect.ValueOf(v))
	case reflect.Map, reflect.Struct:
		return json.Unmarshal([]byte(text), f.Addr().Interface())
	default:
		return fmt.Errorf("cannot hold a value in %s", f.Type())
	}
	return nil
}

// timeLayouts: DATE, DATETIME and TIMESTAMP as the server renders them (the snapshot's text, and
// JSON_OBJECT's: MySQL adds six fraction digits), then RFC 3339 with or without a zone.
var timeLayouts = []string{"2006-01-02 15:04:05.999999999", "2006-01-02", time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"}

// ParseTime reads a date or time as a record carries it: "2024-01-02 10:00:00[.fraction]",
// "2024-01-02", or RFC 3339. UTC unless the text names a zone (a TIMESTAMP's text is in the
// bridge's session time zone, the server's time_zone, which the text does not say). The zero date
// ("0000-00-00 00:00:00") is the zero time.Time, as go-sql-driver/mysql reads it.
func ParseTime(text string) (time.Time, error) {
	if strings.HasPrefix(text, "0000-00-00") && strings.Trim(text[10:], " T0:.") == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("'%s' is no date or time (YYYY-MM-DD[ hh:mm:ss[.fraction]], or RFC 3339)", text)
}
