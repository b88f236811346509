package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// fuzzHome is $HOME while fuzzing, so that "~" always expands.
const fuzzHome = "/home/fuzz"

// fuzzHostNameRE is the host name rule from the package documentation,
// written out again so the fuzz target does not trust the validator's copy.
var fuzzHostNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// fuzzAllocBudget bounds what one Parse may allocate for a document of n
// bytes. A manifest is a few hundred bytes; a parse costs a few hundred
// KiB. YAML aliases must not turn a small file into gigabytes of JSON.
func fuzzAllocBudget(n int) uint64 { return 32<<20 + 1024*uint64(n) }

// heapAllocs returns the bytes allocated on the heap since the program
// started. Unlike runtime.ReadMemStats it does not stop the world.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func FuzzManifestParse(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no manifest fixtures: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Larger cases, alias bombs among them, and regressions are files
	// under testdata/fuzz/FuzzManifestParse.
	for _, s := range []string{
		"",
		"---\n",
		"~\n",
		"[]\n",
		"version: 1\n",
		"version: 1\nhosts: []\n",
		"version: 1\nhosts: [~]\n",
		"version: 1\nhosts: [{name: h, transport: local, inboxes: ['~']}]\n",
		"version: 1\nhosts: [{name: h, transport: local, inboxes: ['~/x/memory-handoffs', '~/x/./memory-handoffs/']}]\n",
		"version: 1\nhosts: [{name: h, transport: local, inboxes: ['~/../memory-handoffs']}]\n",
		"version: 1\nhosts: [{name: h, transport: local, inboxes: ['~root/memory-handoffs']}]\n",
		"version: 1\nhosts: [{name: h, transport: local, discover: [{root: '/', max_depth: 16}]}]\n",
		"version: 1\nhosts: [{name: h, transport: local, discover: [{root: /a, max_depth: -1}, {root: /a/, max_depth: 17}]}]\n",
		"version: 1\nhosts: [{name: h, transport: local, discover: [{root: \"/a\\0b\"}]}]\n",
		"version: 1\nhosts: [{name: h, transport: ssh, ssh: {host: 'me@h', port: -1, connect_timeout: 0s}, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: h, transport: ssh, ssh: {host: h, port: 65535, connect_timeout: 1ns, identities_only: true}, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: h, transport: local, ssh: ~, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: 1, transport: local, discover: [{root: /}]}, {name: '1', transport: local, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: true, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: Laptop, transport: local, discover: [{root: /}]}, {name: laptop, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: -x, transport: LOCAL, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{Name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: h, name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nhosts: [{name: h, transport: local, discover: [{root: /}], harnesses: []}]\n",
		"version: 1\nhosts: [{name: h, transport: local, discover: [{root: /}], harnesses: [., .., ./x, .a\\b, .c, .c]}]\n",
		"version: 1\ndefaults: {max_file_size: 64MiB, timeout: 24h, settle: 0s, max_depth: 0}\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\ndefaults: {max_file_size: 67108865, timeout: 24h0m0.000000001s, settle: -1s}\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\ndefaults: {max_file_size: 1, timeout: 1ns}\nhosts: [{name: h, transport: local, discover: [{root: /}], max_file_size: 1.5, timeout: 0}]\n",
		"version: 1\ndefaults: {max_file_size: 9223372036854775807, timeout: 106751d}\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nnotify: {ping_url: 'https://'}\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nnotify: {ping_url: 'http://[::1]:8080/p'}\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nworkspace: ~\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1\nworkspace: '~'\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 1.0\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 0x1\nhosts: [{name: h, transport: local, discover: [{root: /}]}]\n",
		"version: 99999999999999999999\n",
		"\xef\xbb\xbfversion: 1\n",
		"version: 1\r\nhosts:\r\n  - {name: h, transport: local, discover: [{root: /}]}\r\n",
		"version: !!str 1\n",
		"? [a, b]\n: c\n",
		"version: 1\nhosts:\n  - &h {name: h, transport: local, discover: [{root: /}]}\n  - *h\n",
		"version: 1\nhosts:\n  - &h {name: a, transport: local, discover: [{root: /}]}\n  - <<: *h\n    name: b\n",
		"a: &a [*a]\n",
		"version: 1\n---\nversion: 2\n",
	} {
		f.Add([]byte(s))
	}
	f.Setenv("HOME", fuzzHome)
	const file = "/etc/handoff/writers.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		before := heapAllocs()
		m, err := Parse(data, file)
		if used := heapAllocs() - before; used > fuzzAllocBudget(len(data)) {
			t.Fatalf("Parse of a %d-byte document allocated %d MiB (budget %d MiB): are YAML aliases expanded without a bound?",
				len(data), used>>20, fuzzAllocBudget(len(data))>>20)
		}
		m2, err2 := Parse(data, file)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(m, m2) {
			t.Fatalf("Parse is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if m != nil {
				t.Fatalf("Parse returned a manifest and an error: %v", err)
			}
			if err.Error() != err2.Error() {
				t.Fatalf("Parse errors differ:\n%v\n---\n%v", err, err2)
			}
			checkFuzzErrors(t, err, file)
			return
		}
		checkFuzzManifest(t, m, data, file)
	})
}

// checkFuzzErrors checks that err is made of complete *FieldError values.
func checkFuzzErrors(t *testing.T, err error, file string) {
	t.Helper()
	if err.Error() == "" {
		t.Fatal("Parse returned an error with no text")
	}
	fes := FieldErrors(err)
	if len(fes) == 0 {
		t.Fatalf("Parse error %q holds no *FieldError", err)
	}
	for _, fe := range fes {
		if fe.Msg == "" || fe.Hint == "" || fe.File != file {
			t.Errorf("incomplete field error %#v", fe)
		}
		// Field is "" only for a problem with the file as a whole, such
		// as a YAML syntax error, and such a problem names no host.
		if fe.Field == "" && fe.Host != "" {
			t.Errorf("field error %#v names a host but no field", fe)
		}
		// Error promises one line; the CLI prints it to a terminal with
		// a "hint:" line after it. A tab is harmless there.
		if s := fe.Error(); strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
			t.Errorf("field error is not one line of printable text: %q", s)
		}
	}
}

// checkFuzzManifest checks the promises of the package documentation for
// a manifest Parse accepted.
func checkFuzzManifest(t *testing.T, m *Manifest, data []byte, file string) {
	t.Helper()
	sum := sha256.Sum256(data)
	if m.Path != file || m.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("Path, SHA256 = %q, %q", m.Path, m.SHA256)
	}
	if m.Version != 1 {
		t.Errorf("Version = %d", m.Version)
	}
	if !fuzzCleanPath(m.WorkspaceRaw) || !filepath.IsAbs(m.Workspace) || m.Workspace != filepath.FromSlash(ExpandHome(m.WorkspaceRaw, fuzzHome)) {
		t.Errorf("Workspace = %q (raw %q)", m.Workspace, m.WorkspaceRaw)
	}
	d := m.Defaults
	if d.Harnesses == nil || d.MaxDepth == nil || d.MaxFileSize == nil || d.Settle == nil || d.Timeout == nil {
		t.Errorf("defaults not applied: %+v", d)
	}
	if u := m.Notify.PingURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			t.Errorf("PingURL %q is not an http(s) URL with a host", u)
		}
	}

	cs := m.HostConfigs()
	if len(cs) == 0 || len(cs) != len(m.Hosts) {
		t.Fatalf("%d hosts but %d host configs", len(m.Hosts), len(cs))
	}
	names := make(map[string]bool)
	var order []string
	for i, c := range cs {
		if c.Name != m.Hosts[i].Name || names[c.Name] || !fuzzHostNameRE.MatchString(c.Name) {
			t.Errorf("host %d: name %q is invalid, out of order or a duplicate", i, c.Name)
		}
		names[c.Name] = true
		order = append(order, c.Name)
		if got, ok := m.Host(c.Name); !ok || !reflect.DeepEqual(got, c) {
			t.Errorf("Host(%q) = %+v, %v; want %+v", c.Name, got, ok, c)
		}
		checkFuzzHostConfig(t, c)
	}
	if !slices.Equal(m.HostNames(), order) {
		t.Errorf("HostNames() = %q", m.HostNames())
	}

	// A HostConfig is a copy: changing it must not change the manifest.
	again := m.HostConfigs()
	for i := range cs {
		if len(cs[i].Inboxes) > 0 {
			cs[i].Inboxes[0] = "changed"
		}
		if len(cs[i].Harnesses) > 0 {
			cs[i].Harnesses[0] = "changed"
		}
		if cs[i].SSH != nil {
			cs[i].SSH.Host = "changed"
		}
	}
	if !reflect.DeepEqual(again, m.HostConfigs()) {
		t.Error("changing a HostConfig changed the manifest")
	}

	// The parsed manifest, written back as JSON (which is YAML), is a
	// fixed point: it parses to itself.
	j, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	back, err := Parse(j, file)
	if err != nil {
		t.Fatalf("the manifest as JSON does not parse: %v\n%s", err, j)
	}
	back.Path, back.SHA256, back.WorkspaceRaw = m.Path, m.SHA256, m.WorkspaceRaw
	if !reflect.DeepEqual(back, m) {
		t.Errorf("the manifest as JSON parses to something else:\n%s", j)
	}
}

// checkFuzzHostConfig checks a resolved host against the validation rules.
func checkFuzzHostConfig(t *testing.T, c HostConfig) {
	t.Helper()
	switch c.Transport {
	case TransportLocal:
		if c.SSH != nil {
			t.Errorf("local host %q has an ssh block", c.Name)
		}
	case TransportSSH:
		s := c.SSH
		if s == nil || s.Host == "" || strings.ContainsFunc(s.Host, func(r rune) bool { return r <= ' ' || r == '@' || r == 0x7f }) {
			t.Errorf("ssh host %q: bad ssh block %+v", c.Name, s)
			break
		}
		if s.Port < 0 || s.Port > 65535 || (s.ConnectTimeout != nil && s.ConnectTimeout.Duration <= 0) {
			t.Errorf("ssh host %q: port %d, connect timeout %v", c.Name, s.Port, s.ConnectTimeout)
		}
		for _, p := range []string{s.IdentityFile, s.KnownHosts} {
			if p != "" && !filepath.IsAbs(p) {
				t.Errorf("ssh host %q: local path %q is not absolute", c.Name, p)
			}
		}
	default:
		t.Errorf("host %q: transport %q", c.Name, c.Transport)
	}

	if len(c.Harnesses) == 0 {
		t.Errorf("host %q has no harnesses", c.Name)
	}
	harnesses := make(map[string]bool)
	for _, h := range c.Harnesses {
		if len(h) < 2 || h[0] != '.' || h == ".." || strings.ContainsAny(h, "/\\\x00") || harnesses[h] {
			t.Errorf("host %q: harness %q", c.Name, h)
		}
		harnesses[h] = true
	}
	if c.MaxDepth < 0 || c.MaxDepth > 16 {
		t.Errorf("host %q: max depth %d", c.Name, c.MaxDepth)
	}
	if c.MaxFileSize <= 0 || c.MaxFileSize > int64(64*MiB) {
		t.Errorf("host %q: max file size %d", c.Name, c.MaxFileSize)
	}
	if c.Settle < 0 || c.Timeout <= 0 || c.Timeout > 24*time.Hour {
		t.Errorf("host %q: settle %v, timeout %v", c.Name, c.Settle, c.Timeout)
	}

	if len(c.Inboxes) == 0 && len(c.Discover) == 0 {
		t.Errorf("host %q has no inboxes and no discover roots", c.Name)
	}
	inboxes := make(map[string]bool)
	for _, p := range c.Inboxes {
		if !fuzzCleanPath(p) || path.Base(p) != "memory-handoffs" || inboxes[p] {
			t.Errorf("host %q: inbox %q", c.Name, p)
		}
		inboxes[p] = true
	}
	roots := make(map[string]bool)
	for _, r := range c.Discover {
		if !fuzzCleanPath(r.Root) || roots[r.Root] || r.MaxDepth < 0 || r.MaxDepth > 16 {
			t.Errorf("host %q: discover root %+v", c.Name, r)
		}
		roots[r.Root] = true
	}
}

// fuzzCleanPath reports whether p is in path.Clean form and is absolute,
// "~" or under "~/".
func fuzzCleanPath(p string) bool {
	return p != "" && path.Clean(p) == p && !strings.ContainsRune(p, 0) &&
		(path.IsAbs(p) || p == "~" || strings.HasPrefix(p, "~/"))
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{
		"", "0", "1", "1B", "1b", "1 B", "1KB", "1kb", "1KiB", "1kib", "512 KiB", " 1mib ",
		"1MB", "64MiB", "67108865", "1GB", "2GiB", "1TiB", "1M", "1.5MiB", "1e6", "0x10",
		"+1", "-1", "-0", "00000000000000000000001", "9223372036854775807", "9223372036854775808",
		"8589934591GiB", "8589934592GiB", "9223372036854775807B", "1\u00a0MiB", "1 Mi B", "1MiB extra",
		"١", "1\x00", "\t7\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if n != 0 || err.Error() == "" || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseSize(%q) = %d, %v; want 0 and an error quoting the input", s, n, err)
			}
			return
		}
		if n <= 0 {
			t.Fatalf("ParseSize(%q) = %d; want a positive size", s, n)
		}
		if trimmed := strings.TrimSpace(s); trimmed == "" || trimmed[0] < '0' || trimmed[0] > '9' {
			t.Fatalf("ParseSize(%q) = %d; want an error for a size that does not start with a digit", s, n)
		}
		str := n.String()
		if back, err := ParseSize(str); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d; ParseSize(String() = %q) = %d, %v", s, n, str, back, err)
		}
		if back, err := ParseSize(strconv.FormatInt(int64(n), 10)); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d; the byte count does not parse back: %d, %v", s, n, back, err)
		}
		j, err := json.Marshal(n)
		var back Size
		if err != nil || json.Unmarshal(j, &back) != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d; JSON %s gives %d", s, n, j, back)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"", "0", "0s", "-0s", "-1s", " -1s", "+1s", "1ns", "10s", "5m", "1h30m", "1.5h", ".5s", "1.s",
		"30d", "0d", "d", "1d2h", "+1d", "-1d", "1D", "106751d", "106752d", "99999999999999999999d",
		"2562047h47m16.854775807s", "2562047h47m16.854775808s", "9223372036854775807ns", "1µs", "1us",
		"1\u00a0s", " 10s ", "1e3s", "١d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if d != 0 || err.Error() == "" || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseDuration(%q) = %v, %v; want 0 and an error quoting the input", s, d, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v; want a duration that is not negative", s, d)
		}
		str := d.String()
		if back, err := ParseDuration(str); err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v; ParseDuration(String() = %q) = %v, %v", s, d, str, back, err)
		}
		if d%(24*time.Hour) == 0 {
			days := strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
			if back, err := ParseDuration(days); err != nil || back != d {
				t.Fatalf("ParseDuration(%q) = %v; ParseDuration(%q) = %v, %v", s, d, days, back, err)
			}
		}
		j, err := json.Marshal(Duration{d})
		var back Duration
		if err != nil || json.Unmarshal(j, &back) != nil || back.Duration != d {
			t.Fatalf("ParseDuration(%q) = %v; JSON %s gives %v", s, d, j, back)
		}
	})
}
