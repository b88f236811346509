// Package yamlguard bounds what a YAML document may expand to through
// anchors and aliases before it reaches a decoder that copies every
// expansion.
//
// The YAML parser limits how many nodes aliases may add, not how long the
// aliased strings are; sigs.k8s.io/yaml then writes every expanded copy out
// as JSON. A few kilobytes can so become gigabytes. Within returns false for
// such a document. It parses with go.yaml.in/yaml/v2, which shares an
// aliased value instead of copying it, so the check costs about one parse.
package yamlguard

import yamlv2 "go.yaml.in/yaml/v2"

// Within reports whether data, with its aliases expanded, holds at most
// limit bytes of scalars (plus one per node). A document that does not parse
// counts as within: the real decoder reports it.
func Within(data []byte, limit int) bool {
	var doc any
	if yamlv2.Unmarshal(data, &doc) != nil {
		return true
	}
	n := 0
	var walk func(v any) bool
	walk = func(v any) bool {
		n++
		switch v := v.(type) {
		case string:
			n += len(v)
		case []any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		case map[any]any:
			for k, e := range v {
				if !walk(k) || !walk(e) {
					return false
				}
			}
		}
		return n <= limit
	}
	return walk(doc)
}
