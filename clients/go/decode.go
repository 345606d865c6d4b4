package outbox

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Records into the application's types: each field of a struct takes the record's value of the
// same name (its `outbox:"name"` tag, else its `json:"name"` tag, else its Go name, compared
// without case). The record itself keeps the values' text: that is what the checksum hashes
// (docs/consumers.md section 4), so decoding never changes what is verified.

// Decode sets the fields of the struct out points to from a record: values in columns' order, as
// a Change or a SnapshotRecord holds them. A NULL sets a pointer, slice, map or sql.Scanner field
// to its zero (nil) and is an error for any other; a record field the struct lacks is skipped.
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

var scannerType = reflect.TypeOf((*sql.Scanner)(nil)).Elem()

func setField(f reflect.Value, value Value) error {
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
	case reflect.Map, reflect.Struct, reflect.Interface:
		return json.Unmarshal([]byte(text), f.Addr().Interface())
	default:
		return fmt.Errorf("cannot hold a value in %s", f.Type())
	}
	return nil
}
