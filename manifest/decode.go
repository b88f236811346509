package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"github.com/handoff-sync/handoff/internal/yamlguard"
)

// decode parses data strictly into a Manifest without validating it.
//
// sigs.k8s.io/yaml's UnmarshalStrict rejects duplicate keys and unknown
// fields, but it matches keys case-insensitively and its errors name
// neither the host nor the full field path. So the document is first
// checked against the Manifest type by shapeChecker, which reports every
// unknown key and ill-typed value with its path; UnmarshalStrict then does
// the typed decode.
func decode(data []byte, file string) (*Manifest, error) {
	if !yamlguard.Within(data, maxExpanded) {
		return nil, errors.Join(&FieldError{File: file, Msg: fmt.Sprintf("the document expands to more than %d bytes through YAML aliases", maxExpanded),
			Hint: "write the values out instead of repeating them with YAML aliases"})
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, yamlError(err, file)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, errors.Join(&FieldError{File: file, Msg: err.Error(), Hint: "check the YAML syntax"})
	}
	c := &shapeChecker{file: file}
	c.check(doc, reflect.TypeFor[Manifest](), "")
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	m := new(Manifest)
	if err := yaml.UnmarshalStrict(data, m); err != nil {
		return nil, errors.Join(&FieldError{File: file, Msg: err.Error(), Hint: "check the field types against the manifest documentation"})
	}
	return m, nil
}

// yamlError turns an error from the YAML parser into one FieldError per
// problem, keeping the line numbers the parser reported.
func yamlError(err error, file string) error {
	var te *yamlv2.TypeError
	if !errors.As(err, &te) {
		return errors.Join(&FieldError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: "), Hint: "fix the YAML syntax at that line"})
	}
	var errs []error
	for _, msg := range te.Errors {
		hint := "fix the value at that line"
		if strings.Contains(msg, "already set in map") {
			hint = "remove or rename one of the duplicate keys"
		}
		errs = append(errs, &FieldError{File: file, Msg: msg, Hint: hint})
	}
	return errors.Join(errs...)
}

// shapeChecker compares a decoded JSON document with the Go type it is
// meant for.
type shapeChecker struct {
	file string
	host string // name of the host being checked
	errs []error
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	hostType        = reflect.TypeFor[Host]()
)

// typeHints says how to write the values of the types with their own
// syntax.
var typeHints = map[reflect.Type]string{
	reflect.TypeFor[Size]():     "write a size such as 1MiB, 512KiB or 1000000",
	reflect.TypeFor[Duration](): "write a duration such as 10s, 5m, 1h30m or 30d",
	reflect.TypeFor[Mirror]():   "write mirror: {path: ~/.openclaw/mirror, include: [cards, documents]}, or mirror: false",
}

// check reports the keys of v that t does not declare and the values of v
// that cannot become a t. A null value is always accepted: it leaves the
// zero value.
func (c *shapeChecker) check(v any, t reflect.Type, path string) {
	if v == nil {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		raw, _ := json.Marshal(v)
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			c.add(path, v, err.Error(), typeHints[t])
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		// The YAML decoder turns numbers and booleans into strings where
		// a string is expected.
		switch v.(type) {
		case string, json.Number, bool:
			return
		}
		c.mismatch(path, v, "a string")
	case reflect.Int:
		n, ok := v.(json.Number)
		if _, err := strconv.ParseInt(n.String(), 10, 0); !ok || err != nil {
			c.mismatch(path, v, "a whole number")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.mismatch(path, v, "true or false")
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			c.mismatch(path, v, "a list")
			return
		}
		for i, e := range list {
			c.check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		c.object(v, t, path)
	default:
		panic("manifest: no shape check for " + t.String())
	}
}

// object checks a mapping against struct type t.
func (c *shapeChecker) object(v any, t reflect.Type, path string) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.mismatch(path, v, "a mapping")
		return
	}
	if t == hostType {
		defer func(prev string) { c.host = prev }(c.host)
		c.host = ""
		switch name := obj["name"].(type) {
		case string, json.Number:
			c.host = fmt.Sprint(name)
		}
	}
	fields := jsonFields(t)
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		sub := fieldName(key)
		if path != "" {
			sub = path + "." + sub
		}
		if ft, ok := fields[key]; ok {
			c.check(obj[key], ft, sub)
			continue
		}
		known := slices.Sorted(maps.Keys(fields))
		hint := "known fields here: " + strings.Join(known, ", ")
		for _, f := range known {
			if strings.EqualFold(f, key) {
				hint = fmt.Sprintf("did you mean %q? field names are case-sensitive", f)
			}
		}
		c.add(sub, key, "unknown field", hint)
	}
}

// mismatch reports a value of the wrong kind.
func (c *shapeChecker) mismatch(path string, v any, want string) {
	c.add(path, v, fmt.Sprintf("want %s, not %s", want, describe(v)), kindHints[want])
}

// kindHints says how to write a value of each kind in YAML.
var kindHints = map[string]string{
	"a string":       "write a single value, quoted if it contains special characters",
	"a whole number": "write a whole number without quotes, such as 3",
	"true or false":  "write true or false without quotes",
	"a list":         `write a list such as [a, b], or one "- item" per line`,
	"a mapping":      `write "key: value" lines or {key: value}`,
}

func (c *shapeChecker) add(path string, v any, msg, hint string) {
	value := ""
	switch v := v.(type) {
	case string, json.Number, bool:
		value = fmt.Sprint(v)
	}
	c.errs = append(c.errs, &FieldError{File: c.file, Host: c.host, Field: path, Value: value, Msg: msg, Hint: hint})
}

// describe names the kind of a decoded JSON value.
func describe(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// jsonFields maps the JSON names of t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type)
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	return fields
}

// maxExpanded bounds the scalar bytes a manifest may hold once its YAML
// aliases are expanded.
const maxExpanded = 1 << 20

// fieldName returns key for a field path, quoted unless it is a plain name,
// so that a path is always one line of printable text.
func fieldName(key string) string {
	if key == "" {
		return `""`
	}
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return strconv.Quote(key)
		}
	}
	return key
}
