package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// parse parses a manifest called writers.yaml with $HOME set to testHome.
func parse(t *testing.T, doc string) (*Manifest, error) {
	t.Helper()
	t.Setenv("HOME", testHome)
	return Parse([]byte(doc), "/etc/handoff/writers.yaml")
}

// fieldErrors flattens err, which must be a join of *FieldError.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	if err == nil {
		t.Fatal("got no error")
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var fes []*FieldError
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is a %T, not a *FieldError", e, e)
		}
		fes = append(fes, fe)
	}
	return fes
}

// findError returns the error about host's field, failing the test if
// there is none.
func findError(t *testing.T, err error, host, field string) *FieldError {
	t.Helper()
	fes := fieldErrors(t, err)
	for _, fe := range fes {
		if fe.Host == host && fe.Field == field {
			return fe
		}
	}
	t.Fatalf("no error for host %q field %q; got:\n%v", host, field, err)
	return nil
}

// hosts returns a manifest whose hosts are the given YAML flow mappings.
func hosts(entries ...string) string {
	return "version: 1\nhosts:\n  - " + strings.Join(entries, "\n  - ") + "\n"
}

// laptop is a valid ssh host entry without its closing brace, for cases to
// extend.
const laptop = "{name: laptop, transport: ssh, ssh: {host: laptop}, discover: [{root: ~/code}]"

// laptopSSH is laptop without its ssh block, ending in "ssh: ".
const laptopSSH = "{name: laptop, transport: ssh, discover: [{root: ~/code}], ssh: "

func TestFieldErrorString(t *testing.T) {
	for _, tc := range []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "/etc/handoff/writers.yaml", Host: "laptop", Field: "hosts[1].ssh.port", Value: "70000", Msg: "70000 is out of range 1-65535"},
			`writers.yaml: host "laptop": ssh.port: 70000 is out of range 1-65535`},
		{FieldError{File: "w.yaml", Host: "laptop", Field: "hosts[12]", Msg: "has no inboxes"},
			`w.yaml: host "laptop": has no inboxes`},
		{FieldError{File: "w.yaml", Field: "hosts[2].name", Msg: "is missing"},
			`w.yaml: hosts[2].name: is missing`},
		{FieldError{File: "w.yaml", Field: "defaults.max_depth", Msg: "17 is out of range 0-16"},
			`w.yaml: defaults.max_depth: 17 is out of range 0-16`},
		{FieldError{File: "w.yaml", Msg: "line 3: did not find expected key"},
			`w.yaml: line 3: did not find expected key`},
		{FieldError{Field: "version", Msg: "is missing"},
			`version: is missing`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q; want %q", got, tc.want)
		}
	}
}

func TestErrorNamesFileAndHost(t *testing.T) {
	_, err := parse(t, hosts("{name: other, transport: local, discover: [{root: /r}]}", laptopSSH+"{host: laptop, port: 70000}}"))
	want := `writers.yaml: host "laptop": ssh.port: 70000 is out of range 1-65535`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v; want %q", err, want)
	}
	fe := findError(t, err, "laptop", "hosts[1].ssh.port")
	if fe.File != "/etc/handoff/writers.yaml" || fe.Value != "70000" || fe.Hint == "" {
		t.Errorf("FieldError = %+v", fe)
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := load(t, "bad-syntax.yaml")
	fe := findError(t, err, "", "")
	if msg := fe.Error(); !strings.HasPrefix(msg, "bad-syntax.yaml: line 5: ") || fe.Hint == "" {
		t.Errorf("error = %q (hint %q); want the file name and line 5", msg, fe.Hint)
	}
}

func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"in a host", "", `bad-duplicate.yaml: line 7: key "transport" already set in map`},
		{"top level", "version: 1\nhosts: []\nversion: 1\n", `writers.yaml: line 3: key "version" already set in map`},
		{"in ssh", hosts("{name: a, transport: ssh, ssh: {host: a, host: b}, discover: [{root: /r}]}"), `key "host" already set`},
		{"in defaults", "version: 1\ndefaults:\n  max_depth: 1\n  max_depth: 2\n", `line 4: key "max_depth" already set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.doc == "" {
				_, err = load(t, "bad-duplicate.yaml")
			} else {
				_, err = parse(t, tc.doc)
			}
			fe := findError(t, err, "", "")
			if !strings.Contains(fe.Error(), tc.want) || fe.Hint == "" {
				t.Errorf("error = %q (hint %q); want it to contain %q", fe, fe.Hint, tc.want)
			}
		})
	}
}

func TestUnknownFields(t *testing.T) {
	_, err := load(t, "bad-unknown.yaml")
	var got []string
	for _, fe := range fieldErrors(t, err) {
		got = append(got, fmt.Sprintf("%s|%s|%s", fe.Host, fe.Field, fe.Msg))
		if !strings.HasPrefix(fe.Error(), "bad-unknown.yaml: ") || fe.Hint == "" {
			t.Errorf("error %q (hint %q): want the file name and a hint", fe, fe.Hint)
		}
	}
	want := []string{
		"|defaults.max_size|unknown field",
		"laptop|hosts[0].discover[0].depth|unknown field",
		"laptop|hosts[0].inbox|unknown field",
		"laptop|hosts[0].ssh.Port|unknown field",
		"|workspce|unknown field",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fe := findError(t, err, "laptop", "hosts[0].ssh.Port"); !strings.Contains(fe.Hint, `"port"`) {
		t.Errorf("hint for Port = %q; want it to suggest port", fe.Hint)
	}
}

// TestShape covers unknown fields and values of the wrong type, which are
// found before validation.
func TestShape(t *testing.T) {
	for _, tc := range []struct {
		name, doc   string
		host, field string
		msg         string
	}{
		{"unknown top-level field", "version: 1\nhostz: []\n", "", "hostz", "unknown field"},
		{"field names are case-sensitive", "Version: 1\n", "", "Version", "unknown field"},
		{"unknown field in defaults", "version: 1\ndefaults: {timout: 5m}\n", "", "defaults.timout", "unknown field"},
		{"unknown field in notify", "version: 1\nnotify: {url: https://x}\n", "", "notify.url", "unknown field"},
		{"unknown field in a host", hosts(laptop + ", user: me}"), "laptop", "hosts[0].user", "unknown field"},
		{"unknown field in ssh", hosts("{name: laptop, transport: ssh, ssh: {host: l, password: x}}"), "laptop", "hosts[0].ssh.password", "unknown field"},
		{"unknown field in discover", hosts("{name: laptop, discover: [{root: /r, follow_symlinks: true}]}"), "laptop", "hosts[0].discover[0].follow_symlinks", "unknown field"},
		{"numeric key", "version: 1\n1: x\n", "", "1", "unknown field"},
		{"port not a number", hosts(laptopSSH + "{host: l, port: ssh}}"), "laptop", "hosts[0].ssh.port", "want a whole number, not a string"},
		{"max_depth not whole", hosts(laptop + ", max_depth: 1.5}"), "laptop", "hosts[0].max_depth", "want a whole number, not a number"},
		{"version a string", "version: one\n", "", "version", "want a whole number"},
		{"identities_only not a bool", hosts(laptopSSH + "{host: l, identities_only: maybe}}"), "laptop", "hosts[0].ssh.identities_only", "want true or false"},
		{"hosts a mapping", "version: 1\nhosts: {name: laptop}\n", "", "hosts", "want a list, not a mapping"},
		{"inboxes a string", hosts(laptop + ", inboxes: ~/x/memory-handoffs}"), "laptop", "hosts[0].inboxes", "want a list, not a string"},
		{"defaults a number", "version: 1\ndefaults: 3\n", "", "defaults", "want a mapping, not a number"},
		{"name a list", hosts("{name: [a], transport: local}"), "", "hosts[0].name", "want a string, not a list"},
		{"document a list", "- version: 1\n", "", "", "want a mapping, not a list"},
		{"bad size", "version: 1\ndefaults: {max_file_size: 1XB}\n", "", "defaults.max_file_size", `unknown unit "XB"`},
		{"zero size", hosts(laptop + ", max_file_size: 0}"), "laptop", "hosts[0].max_file_size", "must be positive"},
		{"negative size", hosts(laptop + ", max_file_size: -1KiB}"), "laptop", "hosts[0].max_file_size", "must be positive"},
		{"bad duration", "version: 1\ndefaults: {settle: soon}\n", "", "defaults.settle", "invalid duration"},
		{"negative settle", hosts(laptop + ", settle: -1s}"), "laptop", "hosts[0].settle", "must not be negative"},
		{"duration without unit", hosts(laptop + ", timeout: 30}"), "laptop", "hosts[0].timeout", "invalid duration"},
		{"bad ssh duration", hosts(laptopSSH + "{host: l, connect_timeout: 1y}}"), "laptop", "hosts[0].ssh.connect_timeout", "invalid duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.doc)
			fe := findError(t, err, tc.host, tc.field)
			if !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("Msg = %q; want it to contain %q", fe.Msg, tc.msg)
			}
			if !strings.HasPrefix(fe.Error(), "writers.yaml: ") {
				t.Errorf("error %q does not start with the file name", fe)
			}
			if tc.host != "" && !strings.Contains(fe.Error(), `host "`+tc.host+`"`) {
				t.Errorf("error %q does not name host %q", fe, tc.host)
			}
		})
	}
}

// TestScalarsBecomeStrings checks that YAML numbers and booleans are
// accepted where a string is expected, as sigs.k8s.io/yaml converts them.
func TestScalarsBecomeStrings(t *testing.T) {
	m, err := parse(t, hosts("{name: 42, transport: ssh, ssh: {host: 10.0.0.7, user: 1000}, discover: [{root: /r}]}"))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := m.Host("42"); !ok || c.SSH.User != "1000" || c.SSH.Host != "10.0.0.7" {
		t.Errorf("Host(42) = %+v, %v", c, ok)
	}
}

func TestValidation(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, doc   string
		host, field string
		msg         string
	}{
		{"version missing", "hosts: [" + laptop + "}]\n", "", "version", "is missing"},
		{"version 2", "version: 2\nhosts: [" + laptop + "}]\n", "", "version", "2 is not supported"},
		{"no hosts", "version: 1\n", "", "hosts", "no hosts"},
		{"empty hosts", "version: 1\nhosts: []\n", "", "hosts", "no hosts"},
		{"empty file", "", "", "hosts", "no hosts"},

		{"name missing", hosts("{transport: local, discover: [{root: /r}]}"), "", "hosts[0].name", "is missing"},
		{"name with a space", hosts("{name: my laptop, transport: local, discover: [{root: /r}]}"), "my laptop", "hosts[0].name", "not a valid host name"},
		{"name starting with a dash", hosts("{name: -x, transport: local, discover: [{root: /r}]}"), "-x", "hosts[0].name", "not a valid host name"},
		{"name too long", hosts("{name: " + long + ", transport: local, discover: [{root: /r}]}"), long, "hosts[0].name", "not a valid host name"},
		{"name with a slash", hosts("{name: a/b, transport: local, discover: [{root: /r}]}"), "a/b", "hosts[0].name", "not a valid host name"},
		{"duplicate name", hosts(laptop+"}", "{name: other, transport: local, discover: [{root: /r}]}", laptop+"}"), "laptop", "hosts[2].name", "already the name of hosts[0]"},

		{"transport missing", hosts("{name: laptop, discover: [{root: /r}]}"), "laptop", "hosts[0].transport", "is missing"},
		{"unknown transport", hosts("{name: laptop, transport: sftp, discover: [{root: /r}]}"), "laptop", "hosts[0].transport", `"sftp" is not a transport`},
		{"local host with ssh block", hosts("{name: here, transport: local, ssh: {host: here}, discover: [{root: /r}]}"), "here", "hosts[0].ssh", "takes no ssh block"},
		{"ssh host without ssh block", hosts("{name: laptop, transport: ssh, discover: [{root: /r}]}"), "laptop", "hosts[0].ssh.host", "is missing"},
		{"ssh host without ssh.host", hosts(laptopSSH + "{user: me}}"), "laptop", "hosts[0].ssh.host", "is missing"},
		{"ssh.host with a user", hosts(laptopSSH + "{host: me@laptop}}"), "laptop", "hosts[0].ssh.host", "not a host name"},
		{"ssh.host with a space", hosts(laptopSSH + "{host: 'lap top'}}"), "laptop", "hosts[0].ssh.host", "not a host name"},
		{"port too large", hosts(laptopSSH + "{host: l, port: 65536}}"), "laptop", "hosts[0].ssh.port", "65536 is out of range 1-65535"},
		{"port negative", hosts(laptopSSH + "{host: l, port: -22}}"), "laptop", "hosts[0].ssh.port", "out of range"},
		{"identity_file relative", hosts(laptopSSH + "{host: l, identity_file: .ssh/id}}"), "laptop", "hosts[0].ssh.identity_file", "not absolute"},
		{"known_hosts relative", hosts(laptopSSH + "{host: l, known_hosts: known_hosts}}"), "laptop", "hosts[0].ssh.known_hosts", "not absolute"},
		{"connect_timeout zero", hosts(laptopSSH + "{host: l, connect_timeout: 0s}}"), "laptop", "hosts[0].ssh.connect_timeout", "more than 0"},

		{"harness without dot", hosts(laptop + ", harnesses: [claude]}"), "laptop", "hosts[0].harnesses[0]", "not a harness directory"},
		{"harness dot", "version: 1\ndefaults: {harnesses: [.claude, .]}\n", "", "defaults.harnesses[1]", "not a harness directory"},
		{"harness dot-dot", "version: 1\ndefaults: {harnesses: [..]}\n", "", "defaults.harnesses[0]", "not a harness directory"},
		{"harness with a slash", hosts(laptop + ", harnesses: [.claude/x]}"), "laptop", "hosts[0].harnesses[0]", "not a harness directory"},
		{"harness listed twice", hosts(laptop + ", harnesses: [.codex, .codex]}"), "laptop", "hosts[0].harnesses[1]", "listed twice"},
		{"harnesses empty", "version: 1\ndefaults: {harnesses: []}\n", "", "defaults.harnesses", "empty list"},
		{"stale_after a minute", hosts(laptop + ", stale_after: 1m}"), "laptop", "hosts[0].stale_after", "1m0s is too short: must be 0 (off) or at least 1h"},
		{"defaults stale_after", "version: 1\ndefaults: {stale_after: 59m}\nhosts: [" + laptop + "}]\n", "", "defaults.stale_after", "too short"},

		{"max_depth too deep", "version: 1\ndefaults: {max_depth: 17}\n", "", "defaults.max_depth", "17 is out of range 0-16"},
		{"max_depth negative", hosts(laptop + ", max_depth: -1}"), "laptop", "hosts[0].max_depth", "out of range"},
		{"discover max_depth too deep", hosts("{name: laptop, transport: local, discover: [{root: /a}, {root: /r, max_depth: 20}]}"), "laptop", "hosts[0].discover[1].max_depth", "out of range"},
		{"max_file_size too big", "version: 1\ndefaults: {max_file_size: 65MiB}\n", "", "defaults.max_file_size", "65MiB is out of range 1B-64MiB"},
		{"host max_file_size too big", hosts(laptop + ", max_file_size: 1GB}"), "laptop", "hosts[0].max_file_size", "out of range"},
		{"timeout zero", "version: 1\ndefaults: {timeout: 0s}\n", "", "defaults.timeout", "out of range"},
		{"timeout over a day", hosts(laptop + ", timeout: 2d}"), "laptop", "hosts[0].timeout", "out of range"},

		{"no inbox or discover root", hosts("{name: laptop, transport: local}"), "laptop", "hosts[0]", "no inboxes and no discover roots"},
		{"inbox relative", hosts(laptop + ", inboxes: [code/.claude/memory-handoffs]}"), "laptop", "hosts[0].inboxes[0]", "not absolute"},
		{"inbox ~user", hosts(laptop + ", inboxes: [~me/.claude/memory-handoffs]}"), "laptop", "hosts[0].inboxes[0]", "not absolute"},
		{"inbox escaping ~", hosts(laptop + ", inboxes: [~/../x/memory-handoffs]}"), "laptop", "hosts[0].inboxes[0]", "not absolute"},
		{"inbox with NUL", hosts(laptop + `, inboxes: ["/a\0b/memory-handoffs"]}`), "laptop", "hosts[0].inboxes[0]", "NUL"},
		{"inbox null", hosts(laptop + ", inboxes: [~]}"), "laptop", "hosts[0].inboxes[0]", "is empty"},
		{"inbox not memory-handoffs", hosts(laptop + ", inboxes: [~/code/.claude]}"), "laptop", "hosts[0].inboxes[0]", "not a memory-handoffs directory"},
		{"inbox listed twice", hosts(laptop + ", inboxes: [/a/memory-handoffs, /a/./memory-handoffs/]}"), "laptop", "hosts[0].inboxes[1]", "listed twice"},
		{"discover root relative", hosts("{name: laptop, transport: local, discover: [{root: code}]}"), "laptop", "hosts[0].discover[0].root", "not absolute"},
		{"discover root missing", hosts("{name: laptop, transport: local, discover: [{max_depth: 1}]}"), "laptop", "hosts[0].discover[0].root", "is empty"},
		{"discover root twice", hosts("{name: laptop, transport: local, discover: [{root: ~/a}, {root: ~/a/}]}"), "laptop", "hosts[0].discover[1].root", "listed twice"},

		{"workspace relative", "version: 1\nworkspace: ws\n", "", "workspace", "not absolute"},
		{"ping_url ftp", "version: 1\nnotify: {ping_url: ftp://example.com/x}\n", "", "notify.ping_url", "not an http or https URL"},
		{"ping_url without host", "version: 1\nnotify: {ping_url: 'https:///x'}\n", "", "notify.ping_url", "not an http or https URL"},
		{"ping_url without scheme", "version: 1\nnotify: {ping_url: hc-ping.com/x}\n", "", "notify.ping_url", "not an http or https URL"},
		{"ping_url unparsable", "version: 1\nnotify: {ping_url: 'http://[::1'}\n", "", "notify.ping_url", "not an http or https URL"},
		{"review_max_age zero", "version: 1\ndefaults: {review_max_age: 0s}\n", "", "defaults.review_max_age", "out of range"},
		{"review_max_age over a year", "version: 1\ndefaults: {review_max_age: 400d}\n", "", "defaults.review_max_age", "out of range"},
		{"review_max_age on a host", hosts(laptop + ", review_max_age: 7d, inboxes: [/a/memory-handoffs]}"), "laptop", "hosts[0].review_max_age", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parse(t, tc.doc)
			if m != nil {
				t.Error("Parse returned a manifest with an error")
			}
			fe := findError(t, err, tc.host, tc.field)
			if !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("Msg = %q; want it to contain %q", fe.Msg, tc.msg)
			}
			if fe.Hint == "" {
				t.Errorf("error %q has no hint", fe)
			}
			if !strings.HasPrefix(fe.Error(), "writers.yaml: ") {
				t.Errorf("error %q does not start with the file name", fe)
			}
			if tc.host != "" && !strings.Contains(fe.Error(), `host "`+tc.host+`"`) {
				t.Errorf("error %q does not name host %q", fe, tc.host)
			}
		})
	}
}

func TestHomeUnknown(t *testing.T) {
	t.Setenv("HOME", "")
	_, err := Parse([]byte(hosts(laptop+"}")), "writers.yaml")
	fe := findError(t, err, "", "workspace")
	if !strings.Contains(fe.Msg, "cannot expand ~") {
		t.Errorf("Msg = %q", fe.Msg)
	}
}

func TestPathsCleaned(t *testing.T) {
	m, err := parse(t, hosts("{name: laptop, transport: ssh, inboxes: [~/a//b/./.claude/memory-handoffs/], discover: [{root: '/srv/x/../y/'}, {root: '~/'}], ssh: {host: l, identity_file: ~/.ssh/../.ssh/id}}"))
	if err != nil {
		t.Fatal(err)
	}
	c := m.HostConfigs()[0]
	if !slices.Equal(c.Inboxes, []string{"~/a/b/.claude/memory-handoffs"}) {
		t.Errorf("Inboxes = %q", c.Inboxes)
	}
	if c.Discover[0].Root != "/srv/y" || c.Discover[1].Root != "~" {
		t.Errorf("Discover = %+v", c.Discover)
	}
	if c.SSH.IdentityFile != testHome+"/.ssh/id" {
		t.Errorf("IdentityFile = %q", c.SSH.IdentityFile)
	}
}

func TestMultipleErrors(t *testing.T) {
	_, err := load(t, "bad-many.yaml")
	var got []string
	for _, fe := range fieldErrors(t, err) {
		got = append(got, fe.Host+"|"+fe.Field)
		if !strings.HasPrefix(fe.Error(), "bad-many.yaml: ") || fe.Hint == "" {
			t.Errorf("error %q (hint %q): want the file name and a hint", fe, fe.Hint)
		}
	}
	want := []string{
		"|defaults.max_depth",
		"|defaults.timeout",
		"|hosts[2]",
		"|hosts[2].harnesses[0]",
		"|hosts[2].name",
		"|hosts[2].transport",
		"|notify.ping_url",
		"|version",
		"|workspace",
		"laptop|hosts[0].inboxes[0]",
		"laptop|hosts[0].ssh.port",
		"laptop|hosts[1].discover[0].root",
		"laptop|hosts[1].name",
		"laptop|hosts[1].ssh",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFieldErrors(t *testing.T) {
	_, err := load(t, "bad-syntax.yaml")
	if fes := FieldErrors(err); len(fes) != 1 || fes[0].Field != "" {
		t.Errorf("FieldErrors(syntax error) = %v; want one file-level error", fes)
	}
	_, err = load(t, "bad-many.yaml")
	if fes := FieldErrors(err); len(fes) != 14 || fes[0].Field != "version" {
		t.Errorf("FieldErrors(bad-many) = %d errors starting with %v; want 14 in file order", len(fes), fes)
	}
	_, err = Load("testdata/does-not-exist.yaml")
	if fes := FieldErrors(err); err == nil || fes != nil {
		t.Errorf("FieldErrors(%v) = %v; want none", err, fes)
	}
	if fes := FieldErrors(nil); fes != nil {
		t.Errorf("FieldErrors(nil) = %v", fes)
	}
}
