package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// States of one of handoff's hooks in a file.
const (
	StateCurrent  = "current"  // present once, exactly as install writes it
	StateOutdated = "outdated" // present, but not as install writes it (another program path, event, matcher or timeout; or twice)
	StateAbsent   = "absent"   // not present
)

// Found is one of handoff's handlers found in a file.
type Found struct {
	Kind    string `json:"kind"`
	Event   string `json:"event"`
	Matcher string `json:"matcher,omitempty"`
	Command string `json:"command"`
	Program string `json:"program"`
	Timeout int    `json:"timeout,omitempty"`
	// Alone is true when the handler is the only one of its group.
	Alone bool `json:"-"`
}

// handler is a handler's members handoff reads.
type handler struct {
	Type    string          `json:"type"`
	Command string          `json:"command"`
	Timeout json.RawMessage `json:"timeout"`
}

// group is a matcher group's members handoff reads.
type group struct {
	Matcher *string           `json:"matcher"`
	Hooks   []json.RawMessage `json:"hooks"`
}

// SyntaxError is a file handoff will not change: not a JSON object, or
// its "hooks" not in the shape the harness reads.
type SyntaxError struct {
	What string
	Err  error
}

func (e *SyntaxError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *SyntaxError) Unwrap() error { return e.Err }

// doc is a hooks file as read: its root and its "hooks" object.
type doc struct {
	root  *object
	hooks *object // nil when absent
	also  []string
}

func parseDoc(data []byte, also []string) (*doc, error) {
	d := &doc{also: also}
	if len(bytes.TrimSpace(data)) == 0 {
		d.root = &object{}
		return d, nil
	}
	root, err := parseObject(data)
	if err != nil {
		return nil, &SyntaxError{"the file is not a JSON object", err}
	}
	d.root = root
	if raw, ok := root.get("hooks"); ok {
		h, err := parseObject(raw)
		if err != nil {
			return nil, &SyntaxError{`its "hooks" is not an object`, err}
		}
		d.hooks = h
	}
	return d, nil
}

// find lists handoff's handlers, in file order.
func (d *doc) find() ([]Found, error) {
	if d.hooks == nil {
		return nil, nil
	}
	var out []Found
	for _, ev := range d.hooks.members {
		groups, err := parseArray(ev.raw)
		if err != nil {
			return nil, &SyntaxError{fmt.Sprintf("its hooks.%s is not a list", ev.key), err}
		}
		for _, graw := range groups {
			var g group
			if json.Unmarshal(graw, &g) != nil {
				continue // not a group handoff could have written
			}
			for _, hraw := range g.Hooks {
				var h handler
				if json.Unmarshal(hraw, &h) != nil || h.Type != "command" {
					continue
				}
				kind, prog := KindOf(h.Command, d.also...)
				if kind == "" {
					continue
				}
				f := Found{Kind: kind, Event: ev.key, Command: h.Command, Program: prog, Alone: len(g.Hooks) == 1}
				if g.Matcher != nil {
					f.Matcher = *g.Matcher
				}
				var t json.Number
				if json.Unmarshal(h.Timeout, &t) == nil {
					if n, err := t.Int64(); err == nil {
						f.Timeout = int(n)
					}
				}
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// Inspect lists handoff's handlers in a hooks file and says, for each of
// want, whether it is current, outdated or absent.
func Inspect(data []byte, want []Hook) (found []Found, states map[string]string, err error) {
	d, err := parseDoc(data, programs(want))
	if err != nil {
		return nil, nil, err
	}
	found, err = d.find()
	if err != nil {
		return nil, nil, err
	}
	states = map[string]string{}
	for _, w := range want {
		states[w.Kind] = stateOf(found, w)
	}
	return found, states, nil
}

func stateOf(found []Found, w Hook) string {
	var mine []Found
	for _, f := range found {
		if f.Kind == w.Kind {
			mine = append(mine, f)
		}
	}
	switch {
	case len(mine) == 0:
		return StateAbsent
	case len(mine) == 1 && mine[0].Event == w.Event && mine[0].Matcher == w.Matcher &&
		mine[0].Command == w.Command && mine[0].Timeout == w.Timeout:
		return StateCurrent
	}
	return StateOutdated
}

// Install returns data with want as handoff's hooks: unchanged (changed
// false) when they are all current already; else every handler of
// handoff's is removed and each hook of want appended to its event as a
// group of its own. Nothing else changes.
func Install(data []byte, want []Hook) (out []byte, changed bool, err error) {
	d, err := parseDoc(data, programs(want))
	if err != nil {
		return nil, false, err
	}
	found, err := d.find()
	if err != nil {
		return nil, false, err
	}
	current := true
	for _, w := range want {
		current = current && stateOf(found, w) == StateCurrent
	}
	if current && len(found) == len(want) {
		return data, false, nil
	}
	emptied, err := d.remove(true)
	if err != nil {
		return nil, false, err
	}
	if d.hooks == nil {
		d.hooks = &object{}
	}
	for _, w := range want {
		var groups []json.RawMessage
		if raw, ok := d.hooks.get(w.Event); ok {
			if groups, err = parseArray(raw); err != nil {
				return nil, false, &SyntaxError{fmt.Sprintf("its hooks.%s is not a list", w.Event), err}
			}
		}
		groups = append(groups, groupOf(w))
		d.hooks.set(w.Event, marshalArray(groups))
	}
	for _, ev := range emptied {
		if raw, _ := d.hooks.get(ev); string(raw) == "[]" {
			d.hooks.del(ev)
		}
	}
	d.root.set("hooks", d.hooks.marshal())
	return format(d.root.marshal(), data), true, nil
}

// groupOf is the matcher group install writes for w.
func groupOf(w Hook) json.RawMessage {
	h := &object{}
	h.set("type", json.RawMessage(`"command"`))
	cmd, _ := json.Marshal(w.Command)
	h.set("command", cmd)
	if w.Timeout > 0 {
		h.set("timeout", json.RawMessage(fmt.Sprint(w.Timeout)))
	}
	g := &object{}
	if w.Matcher != "" {
		m, _ := json.Marshal(w.Matcher)
		g.set("matcher", m)
	}
	g.set("hooks", marshalArray([]json.RawMessage{h.marshal()}))
	return g.marshal()
}

// Uninstall returns data without handoff's handlers (changed false when
// it had none): those of a program named handoff, or one of also.
// empty is true when nothing is left in the file: the caller removes it.
func Uninstall(data []byte, also ...string) (out []byte, changed, empty bool, err error) {
	d, err := parseDoc(data, also)
	if err != nil {
		return nil, false, false, err
	}
	emptied, err := d.remove(false)
	if err != nil || emptied == nil {
		return data, false, false, err
	}
	if d.hooks != nil {
		d.root.set("hooks", d.hooks.marshal())
	}
	if len(d.root.members) == 0 {
		return nil, true, true, nil
	}
	return format(d.root.marshal(), data), true, false, nil
}

// remove takes every handler of handoff's out of d, and every group
// that this emptied (one that was empty before stays). Unless keep, so
// are the event lists and the "hooks" object it emptied; with keep an
// emptied list stays, as [], for the caller to fill or drop. It returns
// the events it removed handlers from (nil for none).
func (d *doc) remove(keep bool) (events []string, err error) {
	if d.hooks == nil {
		return nil, nil
	}
	removed := 0
	for _, ev := range slices.Clone(d.hooks.members) {
		groups, err := parseArray(ev.raw)
		if err != nil {
			return nil, &SyntaxError{fmt.Sprintf("its hooks.%s is not a list", ev.key), err}
		}
		var left []json.RawMessage
		evRemoved := 0
		for _, graw := range groups {
			g, err := parseObject(graw)
			hraw, ok := json.RawMessage(nil), false
			if err == nil {
				hraw, ok = g.get("hooks")
			}
			handlers, err2 := parseArray(hraw)
			if !ok || err2 != nil {
				left = append(left, graw)
				continue
			}
			var rest []json.RawMessage
			for _, h := range handlers {
				var hd handler
				if json.Unmarshal(h, &hd) == nil && hd.Type == "command" {
					if kind, _ := KindOf(hd.Command, d.also...); kind != "" {
						continue
					}
				}
				rest = append(rest, h)
			}
			if len(rest) == len(handlers) {
				left = append(left, graw)
				continue
			}
			evRemoved += len(handlers) - len(rest)
			if len(rest) > 0 {
				g.set("hooks", marshalArray(rest))
				left = append(left, g.marshal())
			}
		}
		if evRemoved == 0 {
			continue
		}
		removed += evRemoved
		events = append(events, ev.key)
		if len(left) == 0 && !keep {
			d.hooks.del(ev.key)
		} else {
			d.hooks.set(ev.key, marshalArray(left))
		}
	}
	if removed > 0 && len(d.hooks.members) == 0 && !keep {
		d.root.del("hooks")
		d.hooks = nil
	}
	return events, nil
}
