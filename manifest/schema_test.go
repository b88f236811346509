package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

const schemaTestHome = "/home/schema-tester"

// compileSchema compiles Schema() as draft 2020-12, which also checks it
// against the draft's meta-schema.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return sch
}

// schemaDoc returns Schema() decoded into maps.
func schemaDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatalf("schema is not a JSON object: %v", err)
	}
	return doc
}

// validateYAML checks a YAML document against sch, converting it to JSON
// the way the manifest decoder does.
func validateYAML(t *testing.T, sch *jsonschema.Schema, data []byte) error {
	t.Helper()
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("YAML to JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatalf("decoding %s: %v", j, err)
	}
	return sch.Validate(inst)
}

func TestSchemaIsValid(t *testing.T) {
	if !json.Valid(Schema()) {
		t.Fatal("Schema() is not valid JSON")
	}
	if !bytes.HasSuffix(Schema(), []byte("}\n")) {
		t.Error("Schema() does not end in a newline")
	}
	compileSchema(t)
	doc := schemaDoc(t)
	for key, want := range map[string]string{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$id":     SchemaID,
	} {
		if doc[key] != want {
			t.Errorf("%s = %v; want %q", key, doc[key], want)
		}
	}
	for _, key := range []string{"title", "description"} {
		if s, _ := doc[key].(string); s == "" {
			t.Errorf("the schema has no %s", key)
		}
	}
	// Schema returns a copy: a caller cannot change what the next one gets.
	Schema()[0] = 'x'
	if Schema()[0] != '{' {
		t.Error("Schema() returns the embedded bytes themselves")
	}
}

// TestSchemaAcceptsTestdata validates every manifest in testdata that
// Load accepts, among them the SPEC's example, against the schema; the
// ones Load rejects for their shape must fail the schema too.
func TestSchemaAcceptsTestdata(t *testing.T) {
	sch := compileSchema(t)
	t.Setenv("HOME", schemaTestHome)
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	var accepted []string
	for _, f := range files {
		name := filepath.Base(f)
		if _, err := Load(f); err != nil {
			continue
		}
		accepted = append(accepted, name)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateYAML(t, sch, data); err != nil {
			t.Errorf("%s: Load accepts it, the schema does not:\n%v", name, err)
		}
	}
	for _, want := range []string{"example.yaml", "minimal.yaml", "overrides.yaml"} {
		if !slices.Contains(accepted, want) {
			t.Errorf("Load rejected %s; accepted only %q", want, accepted)
		}
	}
	// Unknown fields and a bad version, transport, name and harness.
	for _, name := range []string{"bad-unknown.yaml", "bad-many.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := validateYAML(t, sch, data); err == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
	}
}

// schemaHosts makes a version 1 manifest with the given hosts, each a YAML
// flow mapping.
func schemaHosts(hosts ...string) string {
	return "version: 1\nhosts:\n  - " + strings.Join(hosts, "\n  - ") + "\n"
}

const (
	schemaLocal = "{name: here, transport: local, discover: [{root: ~/code}]"
	schemaSSH   = "{name: laptop, transport: ssh, discover: [{root: ~/code}], ssh: "
)

// TestSchemaAgreesOnGood lists manifests that use the less common forms
// the loader accepts; the schema must accept them too.
func TestSchemaAgreesOnGood(t *testing.T) {
	sch := compileSchema(t)
	t.Setenv("HOME", schemaTestHome)
	for _, tc := range []struct{ name, doc string }{
		{"local host", schemaHosts(schemaLocal + "}")},
		{"inbox only", schemaHosts("{name: here, transport: local, inboxes: [/srv/a/.claude/memory-handoffs/]}")},
		{"root is the home", schemaHosts("{name: here, transport: local, discover: [{root: '~'}]}")},
		{"workspace absolute", "workspace: /var/lib/ws\n" + schemaHosts(schemaLocal+"}")},
		{"size in bytes", schemaHosts(schemaLocal + ", max_file_size: 1000}")},
		{"size in bytes as a string", schemaHosts(schemaLocal + ", max_file_size: '4096'}")},
		{"size with a space", schemaHosts(schemaLocal + ", max_file_size: 256 KiB}")},
		{"size lower case", schemaHosts(schemaLocal + ", max_file_size: 2mb}")},
		{"largest size", schemaHosts(schemaLocal + ", max_file_size: 64MiB}")},
		{"largest size in bytes", schemaHosts(schemaLocal + ", max_file_size: 67108864}")},
		{"settle 0 as a number", schemaHosts(schemaLocal + ", settle: 0}")},
		{"settle in days", schemaHosts(schemaLocal + ", settle: 2d}")},
		{"fractional duration", schemaHosts(schemaLocal + ", timeout: 1.5h}")},
		{"compound duration", schemaHosts(schemaLocal + ", timeout: 1h30m10s}")},
		{"microseconds", "version: 1\ndefaults: {settle: 90µs}\n" + "hosts: [" + schemaLocal + "}]\n"},
		{"max_depth bounds", schemaHosts("{name: here, transport: local, max_depth: 0, discover: [{root: /a, max_depth: 16}]}")},
		{"harnesses", "version: 1\ndefaults: {harnesses: [.claude, .my.tool]}\n" + "hosts: [" + schemaLocal + "}]\n"},
		{"host name of 63", schemaHosts("{name: " + strings.Repeat("a", 63) + ", transport: local, discover: [{root: /r}]}")},
		{"host name with dots", schemaHosts("{name: build-box.example_1, transport: local, discover: [{root: /r}]}")},
		{"every ssh field", schemaHosts(schemaSSH + "{host: 10.0.0.7, user: me, port: 2222, identity_file: ~/.ssh/id, known_hosts: /etc/ssh/known, proxy_jump: 'me@bastion:22,jump2', connect_timeout: 15s, server_alive_interval: 30s, identities_only: false}}")},
		{"port 0", schemaHosts(schemaSSH + "{host: laptop, port: 0}}")},
		{"port 65535", schemaHosts(schemaSSH + "{host: laptop, port: 65535}}")},
		{"ping url", "version: 1\nnotify: {ping_url: 'http://localhost:8000/ping/x'}\n" + "hosts: [" + schemaLocal + "}]\n"},
		{"share_notes false", schemaHosts(schemaLocal + ", share_notes: false}")},
		{"share_notes in defaults", "version: 1\ndefaults: {share_notes: false}\n" + "hosts: [" + schemaLocal + ", share_notes: true}]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.doc), "writers.yaml"); err != nil {
				t.Fatalf("Parse rejects it: %v", err)
			}
			if err := validateYAML(t, sch, []byte(tc.doc)); err != nil {
				t.Errorf("the schema rejects it:\n%v", err)
			}
		})
	}
}

// TestSchemaAgreesOnBad lists manifests the loader rejects, most for their
// shape; the schema must reject them too.
func TestSchemaAgreesOnBad(t *testing.T) {
	sch := compileSchema(t)
	t.Setenv("HOME", schemaTestHome)
	withDefaults := func(d string) string { return "version: 1\ndefaults: " + d + "\nhosts: [" + schemaLocal + "}]\n" }
	for _, tc := range []struct{ name, doc string }{
		// Unknown fields, at every level.
		{"unknown top-level field", schemaHosts(schemaLocal+"}") + "hostz: []\n"},
		{"field names are case-sensitive", "Version: 1\nhosts: [" + schemaLocal + "}]\n"},
		{"unknown field in defaults", withDefaults("{timout: 5m}")},
		{"unknown field in notify", "version: 1\nnotify: {url: 'https://x'}\nhosts: [" + schemaLocal + "}]\n"},
		{"unknown field in a host", schemaHosts(schemaLocal + ", user: me}")},
		{"unknown field in ssh", schemaHosts(schemaSSH + "{host: l, password: x}}")},
		{"unknown field in discover", schemaHosts("{name: here, transport: local, discover: [{root: /r, follow_symlinks: true}]}")},

		// Wrong types.
		{"document a list", "- version: 1\n"},
		{"version a string", "version: one\nhosts: [" + schemaLocal + "}]\n"},
		{"hosts a mapping", "version: 1\nhosts: {name: here}\n"},
		{"defaults a number", "version: 1\ndefaults: 3\nhosts: [" + schemaLocal + "}]\n"},
		{"port a string", schemaHosts(schemaSSH + "{host: l, port: ssh}}")},
		{"max_depth a fraction", schemaHosts(schemaLocal + ", max_depth: 1.5}")},
		{"identities_only not a bool", schemaHosts(schemaSSH + "{host: l, identities_only: maybe}}")},
		{"share_notes not a bool", schemaHosts(schemaLocal + ", share_notes: maybe}")},
		{"share_notes in defaults not a bool", withDefaults("{share_notes: 0}")},
		{"inboxes a string", schemaHosts("{name: here, transport: local, inboxes: ~/x/memory-handoffs}")},
		{"discover a string", schemaHosts("{name: here, transport: local, discover: ~/code}")},

		// Version, hosts, names and transports.
		{"version missing", "hosts: [" + schemaLocal + "}]\n"},
		{"version 2", "version: 2\nhosts: [" + schemaLocal + "}]\n"},
		{"no hosts", "version: 1\n"},
		{"empty hosts", "version: 1\nhosts: []\n"},
		{"name missing", schemaHosts("{transport: local, discover: [{root: /r}]}")},
		{"name with a space", schemaHosts("{name: my laptop, transport: local, discover: [{root: /r}]}")},
		{"name starting with a dash", schemaHosts("{name: -x, transport: local, discover: [{root: /r}]}")},
		{"name too long", schemaHosts("{name: " + strings.Repeat("a", 64) + ", transport: local, discover: [{root: /r}]}")},
		{"name with a slash", schemaHosts("{name: a/b, transport: local, discover: [{root: /r}]}")},
		{"transport missing", schemaHosts("{name: here, discover: [{root: /r}]}")},
		{"unknown transport", schemaHosts("{name: here, transport: sftp, discover: [{root: /r}]}")},
		{"ssh host without ssh block", schemaHosts("{name: laptop, transport: ssh, discover: [{root: /r}]}")},
		{"ssh block without host", schemaHosts(schemaSSH + "{user: me}}")},
		{"local host with ssh block", schemaHosts(schemaLocal + ", ssh: {host: here}}")},
		{"ssh.host with a user", schemaHosts(schemaSSH + "{host: me@laptop}}")},
		{"ssh.host with a space", schemaHosts(schemaSSH + "{host: 'lap top'}}")},
		{"port too large", schemaHosts(schemaSSH + "{host: l, port: 65536}}")},
		{"port negative", schemaHosts(schemaSSH + "{host: l, port: -22}}")},

		// Settings.
		{"harness without a dot", withDefaults("{harnesses: [claude]}")},
		{"harness dot", withDefaults("{harnesses: [.]}")},
		{"harness dot-dot", withDefaults("{harnesses: [..]}")},
		{"harness with a slash", schemaHosts(schemaLocal + ", harnesses: [.claude/x]}")},
		{"harness twice", schemaHosts(schemaLocal + ", harnesses: [.codex, .codex]}")},
		{"harnesses empty", withDefaults("{harnesses: []}")},
		{"max_depth too deep", withDefaults("{max_depth: 17}")},
		{"max_depth negative", schemaHosts(schemaLocal + ", max_depth: -1}")},
		{"discover max_depth too deep", schemaHosts("{name: here, transport: local, discover: [{root: /r, max_depth: 20}]}")},
		{"size with a bad unit", withDefaults("{max_file_size: 1XB}")},
		{"size K without B", withDefaults("{max_file_size: 1K}")},
		{"size fractional", withDefaults("{max_file_size: 1.5MiB}")},
		{"size zero", schemaHosts(schemaLocal + ", max_file_size: 0}")},
		{"size zero with unit", schemaHosts(schemaLocal + ", max_file_size: 0KiB}")},
		{"size negative", schemaHosts(schemaLocal + ", max_file_size: -1KiB}")},
		{"size too big in bytes", schemaHosts(schemaLocal + ", max_file_size: 67108865}")},
		{"duration without unit", schemaHosts(schemaLocal + ", timeout: 30}")},
		{"duration a word", withDefaults("{settle: soon}")},
		{"duration negative", schemaHosts(schemaLocal + ", settle: -1s}")},
		{"duration days and hours", schemaHosts(schemaLocal + ", settle: 1d2h}")},
		{"duration with a space", schemaHosts(schemaLocal + ", timeout: 1h 30m}")},
		{"duration in years", schemaHosts(schemaSSH + "{host: l, connect_timeout: 1y}}")},

		// Paths and URLs.
		{"no inbox or discover root", schemaHosts("{name: here, transport: local}")},
		{"empty inboxes and discover", schemaHosts("{name: here, transport: local, inboxes: [], discover: []}")},
		{"inbox relative", schemaHosts("{name: here, transport: local, inboxes: [code/.claude/memory-handoffs]}")},
		{"inbox ~user", schemaHosts("{name: here, transport: local, inboxes: [~me/.claude/memory-handoffs]}")},
		{"inbox not memory-handoffs", schemaHosts("{name: here, transport: local, inboxes: [~/code/.claude]}")},
		{"inbox twice", schemaHosts("{name: here, transport: local, inboxes: [/a/memory-handoffs, /a/memory-handoffs]}")},
		{"discover root relative", schemaHosts("{name: here, transport: local, discover: [{root: code}]}")},
		{"discover root missing", schemaHosts("{name: here, transport: local, discover: [{max_depth: 1}]}")},
		{"workspace relative", "version: 1\nworkspace: ws\nhosts: [" + schemaLocal + "}]\n"},
		{"identity_file relative", schemaHosts(schemaSSH + "{host: l, identity_file: .ssh/id}}")},
		{"known_hosts relative", schemaHosts(schemaSSH + "{host: l, known_hosts: known_hosts}}")},
		{"ping_url ftp", "version: 1\nnotify: {ping_url: 'ftp://example.com/x'}\nhosts: [" + schemaLocal + "}]\n"},
		{"ping_url without scheme", "version: 1\nnotify: {ping_url: hc-ping.com/x}\nhosts: [" + schemaLocal + "}]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.doc), "writers.yaml"); err == nil {
				t.Fatal("Parse accepts it")
			}
			if err := validateYAML(t, sch, []byte(tc.doc)); err == nil {
				t.Error("the schema accepts it")
			}
		})
	}
}

// TestSchemaPatterns checks the size and duration patterns against
// ParseSize and ParseDuration, string by string. (Both functions also
// accept surrounding spaces, which YAML strips from plain scalars; the
// patterns do not, nor do they know about int64 overflow.)
func TestSchemaPatterns(t *testing.T) {
	defs := schemaDoc(t)["$defs"].(map[string]any)
	pattern := func(def string) *regexp.Regexp {
		return regexp.MustCompile(defs[def].(map[string]any)["pattern"].(string))
	}
	size := pattern("size")
	for _, s := range []string{
		"1", "1048576", "007", "67108865", "1GB", "1B", "1b", "1KB", "1kb", "1MB", "1GB", "1KiB", "1kib", "1MiB", "1GiB", "512 KiB", "2\tMiB",
		"", "0", "00", "0B", "0MiB", "-1", "-1KiB", "1K", "1M", "1KBB", "1.5MiB", ".5MiB", "1TiB", "MiB", "1 2MiB", "1e6", "+1",
	} {
		_, err := ParseSize(s)
		if got := size.MatchString(s); got != (err == nil) {
			t.Errorf("size %q: pattern matches %v, ParseSize error %v", s, got, err)
		}
	}
	duration := pattern("duration")
	for _, s := range []string{
		"0", "+0", "10s", "5m", "1h", "1h30m", "1h30m10s", "1.5h", ".5s", "5.s", "5.25ms", "10ns", "10us", "10µs", "10μs",
		"5m0s", "+5m", "0s", "0d", "30d", "365d",
		"", "-0", "-1s", "30", "1", "1.5", ".", ".s", "s", "1d2h", "2h1d", "+30d", "1.5d", "1h 30m", "1y", "1w", "1S", "1H", "1sec",
	} {
		_, err := ParseDuration(s)
		if got := duration.MatchString(s); got != (err == nil) {
			t.Errorf("duration %q: pattern matches %v, ParseDuration error %v", s, got, err)
		}
	}
}

// TestSchemaMatchesTypes is the drift test: walking the Go types from
// Manifest down, every json field must be a property of the matching
// schema object and have a description, every property must be a field,
// every object must forbid other properties, and a field is required
// exactly when its json tag has no omitempty or omitzero.
func TestSchemaMatchesTypes(t *testing.T) {
	doc := schemaDoc(t)
	w := &schemaWalker{t: t, root: doc, seen: make(map[reflect.Type]bool)}
	w.value(doc, reflect.TypeFor[Manifest](), "(root)")
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Manifest](), reflect.TypeFor[Defaults](), reflect.TypeFor[Notify](),
		reflect.TypeFor[Host](), reflect.TypeFor[Discover](), reflect.TypeFor[SSH](),
	} {
		if !w.seen[typ] {
			t.Errorf("the walk never reached %v", typ)
		}
	}

	// No object anywhere in the schema allows unknown properties.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if slices.Contains(schemaTypes(v), "object") && v["additionalProperties"] != false {
				t.Errorf("%s: an object without additionalProperties: false", at)
			}
			for k, e := range v {
				walk(e, at+"/"+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(doc, "#")
}

type schemaWalker struct {
	t    *testing.T
	root map[string]any
	seen map[reflect.Type]bool
}

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[Duration]()
	mirrorType   = reflect.TypeFor[Mirror]()
)

// resolve follows a local $ref.
func (w *schemaWalker) resolve(node map[string]any, at string) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		w.t.Fatalf("%s: $ref %q is not under #/$defs/", at, ref)
	}
	def, ok := w.root["$defs"].(map[string]any)[name].(map[string]any)
	if !ok {
		w.t.Fatalf("%s: $ref %q names no definition", at, ref)
	}
	return w.resolve(def, at)
}

// value checks that the schema node describes values of Go type typ.
func (w *schemaWalker) value(node map[string]any, typ reflect.Type, at string) {
	t := w.t
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ {
	case sizeType, durationType:
		want := "#/$defs/" + map[reflect.Type]string{sizeType: "size", durationType: "duration"}[typ]
		if node["$ref"] != want {
			t.Errorf("%s: a %v field must be {$ref: %q}, not %v", at, typ, want, node)
		}
		return
	}
	node = w.resolve(node, at)
	types := schemaTypes(node)
	switch typ.Kind() {
	case reflect.String:
		w.wantType(at, types, "string")
	case reflect.Int:
		w.wantType(at, types, "integer")
	case reflect.Bool:
		w.wantType(at, types, "boolean")
	case reflect.Slice:
		w.wantType(at, types, "array")
		items, ok := node["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: an array without items", at)
			return
		}
		w.value(items, typ.Elem(), at+"[]")
	case reflect.Struct:
		if typ == mirrorType {
			// A mirror is a mapping or false.
			if !slices.Equal(types, []string{"object", "boolean"}) {
				t.Errorf("%s: schema type %q; want [object boolean]", at, types)
			}
		} else {
			w.wantType(at, types, "object")
		}
		w.object(node, typ, at)
	default:
		t.Errorf("%s: no schema check for Go type %v", at, typ)
	}
}

func (w *schemaWalker) wantType(at string, types []string, want string) {
	if !slices.Equal(types, []string{want}) {
		w.t.Errorf("%s: schema type %q; want %q", at, types, want)
	}
}

// object checks a struct's fields against a schema object.
func (w *schemaWalker) object(node map[string]any, typ reflect.Type, at string) {
	t := w.t
	w.seen[typ] = true
	if node["additionalProperties"] != false {
		t.Errorf("%s (%v): additionalProperties is %v; want false", at, typ, node["additionalProperties"])
	}
	props, _ := node["properties"].(map[string]any)
	var required []string
	for _, r := range asSlice(node["required"]) {
		required = append(required, r.(string))
	}
	var fields, mustHave []string
	for f := range typ.Fields() {
		tag, ok := f.Tag.Lookup("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !ok || name == "" {
			t.Errorf("%v.%s has no json name; the manifest's field names come from json tags", typ, f.Name)
			continue
		}
		fields = append(fields, name)
		optional := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })
		if !optional {
			mustHave = append(mustHave, name)
		}
		p, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s: field %s (%v.%s) is not in the schema", at, name, typ, f.Name)
			continue
		}
		if d, _ := p["description"].(string); d == "" {
			if d, _ := w.resolve(p, at)["description"].(string); d == "" {
				t.Errorf("%s.%s: no description", at, name)
			}
		}
		w.value(p, f.Type, at+"."+name)
	}
	for name := range props {
		if !slices.Contains(fields, name) {
			t.Errorf("%s: property %s is not a field of %v", at, name, typ)
		}
	}
	slices.Sort(required)
	slices.Sort(mustHave)
	if !slices.Equal(required, mustHave) {
		t.Errorf("%s: required %q; the fields without omitempty are %q", at, required, mustHave)
	}
}

// TestSchemaDefaultsAndLimits checks the defaults, ranges and patterns in
// the schema against this package's.
func TestSchemaDefaultsAndLimits(t *testing.T) {
	doc := schemaDoc(t)
	defs := doc["$defs"].(map[string]any)
	get := func(path ...string) any {
		var v any = doc
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("schema has no %s", strings.Join(path, "/"))
			}
			v = m[p]
		}
		return v
	}
	dprop := func(name string) map[string]any { return get("$defs", "defaults", "properties", name).(map[string]any) }

	if got := get("properties", "workspace", "default"); got != DefaultWorkspace {
		t.Errorf("workspace default %v; want %q", got, DefaultWorkspace)
	}
	var harnesses []string
	for _, h := range asSlice(dprop("harnesses")["default"]) {
		harnesses = append(harnesses, h.(string))
	}
	if !slices.Equal(harnesses, DefaultHarnesses()) {
		t.Errorf("harnesses default %q; want %q", harnesses, DefaultHarnesses())
	}
	if got := dprop("max_depth")["default"]; got != float64(DefaultMaxDepth) {
		t.Errorf("max_depth default %v; want %d", got, DefaultMaxDepth)
	}
	if s, err := ParseSize(fmt.Sprint(dprop("max_file_size")["default"])); err != nil || s != DefaultMaxFileSize {
		t.Errorf("max_file_size default %v (%v); want %v", dprop("max_file_size")["default"], err, DefaultMaxFileSize)
	}
	for name, want := range map[string]any{"settle": DefaultSettle, "timeout": DefaultTimeout, "review_max_age": DefaultReviewMaxAge} {
		if d, err := ParseDuration(fmt.Sprint(dprop(name)["default"])); err != nil || d != want {
			t.Errorf("%s default %v (%v); want %v", name, dprop(name)["default"], err, want)
		}
	}

	if got := dprop("share_notes")["default"]; got != true {
		t.Errorf("share_notes default %v; want true", got)
	}
	if got := get("$defs", "maxDepth", "maximum"); got != float64(maxMaxDepth) {
		t.Errorf("maxDepth maximum %v; want %d", got, maxMaxDepth)
	}
	if got := get("$defs", "size", "maximum"); got != float64(maxMaxFileSize) {
		t.Errorf("size maximum %v; want %d", got, maxMaxFileSize)
	}
	if got := get("$defs", "host", "properties", "name", "pattern"); got != hostNameRE.String() {
		t.Errorf("host name pattern %v; want %q", got, hostNameRE.String())
	}
	var transports []string
	for _, tr := range asSlice(get("$defs", "host", "properties", "transport", "enum")) {
		transports = append(transports, tr.(string))
	}
	if !slices.Equal(transports, []string{TransportLocal, TransportSSH}) {
		t.Errorf("transport enum %q", transports)
	}
	if get("properties", "version", "const") != float64(1) {
		t.Error("version is not const 1")
	}
	for name := range defs {
		if d, _ := defs[name].(map[string]any)["description"].(string); d == "" {
			t.Errorf("$defs/%s has no description", name)
		}
	}
}

// schemaTypes returns a schema node's "type" as a list.
func schemaTypes(node map[string]any) []string {
	switch v := node["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, e.(string))
		}
		return out
	}
	return nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestSchemaDocExamples checks every YAML manifest in docs/manifest.md:
// handoff and the schema must both accept it.
func TestSchemaDocExamples(t *testing.T) {
	sch := compileSchema(t)
	t.Setenv("HOME", schemaTestHome)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "manifest.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```yaml\n(.*?)^```$").FindAllSubmatch(doc, -1)
	n := 0
	for i, b := range blocks {
		yml := b[1]
		if !regexp.MustCompile(`(?m)^version: 1$`).Match(yml) {
			continue // a fragment, or another file's YAML
		}
		n++
		if _, err := Parse(yml, fmt.Sprintf("docs/manifest.md block %d", i+1)); err != nil {
			t.Errorf("docs/manifest.md YAML block %d: handoff rejects it: %v\n%s", i+1, err, yml)
		}
		if err := validateYAML(t, sch, yml); err != nil {
			t.Errorf("docs/manifest.md YAML block %d: the schema rejects it: %v\n%s", i+1, err, yml)
		}
	}
	if n < 4 {
		t.Errorf("found %d complete manifests in docs/manifest.md; want at least 4", n)
	}
}
