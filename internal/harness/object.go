package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// member is one member of a JSON object, its value as read.
type member struct {
	key string
	raw json.RawMessage
}

// object is a JSON object that keeps its members' order and bytes.
type object struct{ members []member }

// parseObject reads one JSON object, keeping its members in order. A
// repeated key is an error: which of the two a harness obeys is not ours
// to guess.
func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	o := &object{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("an object key is not a string")
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		o.members = append(o.members, member{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return o, nil
}

func (o *object) get(key string) (json.RawMessage, bool) {
	for _, m := range o.members {
		if m.key == key {
			return m.raw, true
		}
	}
	return nil, false
}

// set replaces key's value where it stands, or appends it.
func (o *object) set(key string, raw json.RawMessage) {
	for i, m := range o.members {
		if m.key == key {
			o.members[i].raw = raw
			return
		}
	}
	o.members = append(o.members, member{key, raw})
}

func (o *object) del(key string) {
	for i, m := range o.members {
		if m.key == key {
			o.members = append(o.members[:i], o.members[i+1:]...)
			return
		}
	}
}

// marshal writes the object compactly, each value as read.
func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, m.raw); err != nil {
			b.Write(m.raw)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func parseArray(raw json.RawMessage) ([]json.RawMessage, error) {
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	return a, nil
}

func marshalArray(a []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := json.Compact(&b, v); err != nil {
			b.Write(v)
		}
	}
	b.WriteByte(']')
	return b.Bytes()
}

// indentOf guesses the indent unit a file uses: the leading white space
// of its first indented line; two spaces when it has none.
func indentOf(data []byte) string {
	for _, line := range strings.Split(string(data), "\n")[1:] {
		trimmed := strings.TrimLeft(line, " \t")
		if n := len(line) - len(trimmed); n > 0 && trimmed != "" {
			return line[:n]
		}
	}
	return "  "
}

// format indents a compact document as the original was (newline at the
// end when the original had one or there was none).
func format(compact json.RawMessage, original []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", indentOf(original)); err != nil {
		return compact
	}
	if len(original) == 0 || bytes.HasSuffix(original, []byte("\n")) {
		b.WriteByte('\n')
	}
	return b.Bytes()
}
