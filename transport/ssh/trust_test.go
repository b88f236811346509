package ssh

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

func pubLine(t *testing.T) (ssh.PublicKey, string) {
	t.Helper()
	s, _ := sshdtest.NewEd25519(t)
	return s.PublicKey(), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

// TestPlanTrust: trusting a key adds its line; trusting a changed key
// replaces the old key's lines (plain, hashed, or this host's name on a
// shared line) so the old key is no longer trusted. Invariant: every
// other line (other hosts, comments, blank lines) stays byte for byte.
func TestPlanTrust(t *testing.T) {
	t.Parallel()
	newKey, _ := sshdtest.NewEd25519(t)
	_, oldText := pubLine(t)
	_, otherText := pubLine(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPub, _ := ssh.NewPublicKey(&ec.PublicKey)
	ecText := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ecPub)))
	const host = "[127.0.0.1]:2222"
	hashed := xknownhosts.HashHostname(host)
	cfg := Config{Alias: "laptop", HostName: "127.0.0.1", Port: 2222}
	keep := "# my hosts\n\nother.example " + otherText + " a comment\n"
	cases := []struct {
		name, before string
		changed      []int // replaced line numbers
		after        string
	}{
		{"absent", "", nil, "NEW\n"},
		{"new host", keep, nil, keep + "NEW\n"},
		{"no final newline", strings.TrimSuffix(keep, "\n"), nil, keep + "NEW\n"},
		{"changed", keep + host + " " + oldText + "\n# after\n", []int{4}, keep + "NEW\n# after\n"},
		{"changed twice", host + " " + oldText + "\n" + keep + hashed + " " + oldText + "\n", []int{1, 5}, "NEW\n" + keep},
		// An earlier handoff appended the new key and kept the old one.
		{"appended before", host + " " + oldText + "\nNEW\n", []int{1}, "NEW\n"},
		// The host's key of another type stays (the server may still
		// have it); when none of the new key's type was known, the
		// server has none of the old types any more, and they go.
		{"other type kept", host + " " + ecText + "\n" + host + " " + oldText + "\n", []int{2}, host + " " + ecText + "\nNEW\n"},
		{"other type only", keep + host + " " + ecText + "\n", []int{4}, keep + "NEW\n"},
		{"shared line", "other.example," + host + " " + oldText + " c\n" + keep, []int{1}, "other.example " + oldText + " c\nNEW\n" + keep},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ssh", "known_hosts")
			if tc.before != "" {
				os.MkdirAll(filepath.Dir(file), 0o700)
				before := strings.ReplaceAll(tc.before, "NEW", KnownHostsLine(cfg, newKey.PublicKey()))
				if err := os.WriteFile(file, []byte(before), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			c := cfg
			c.KnownHostsFiles = []string{file}
			p, err := PlanTrust(c, newKey.PublicKey())
			if err != nil {
				t.Fatalf("PlanTrust: %v", err)
			}
			var got []int
			for _, o := range p.Replaced {
				got = append(got, o.Line)
				if o.Fingerprint == ssh.FingerprintSHA256(newKey.PublicKey()) || !strings.HasPrefix(o.Fingerprint, "SHA256:") {
					t.Errorf("old key %+v", o)
				}
			}
			if p.Trusted || p.Changed() != (len(tc.changed) > 0) || len(got) != len(tc.changed) || (len(got) > 0 && got[0] != tc.changed[0]) {
				t.Fatalf("plan: trusted %v, replaced lines %v; want %v", p.Trusted, got, tc.changed)
			}
			if err := p.Apply(); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(file)
			if want := strings.ReplaceAll(tc.after, "NEW", p.Line); string(b) != want {
				t.Errorf("known_hosts:\n%q\nwant\n%q", b, want)
			}
			if st, _ := os.Stat(file); tc.before != "" && st.Mode().Perm() != 0o640 || tc.before == "" && st.Mode().Perm() != 0o600 {
				t.Errorf("mode %v", st.Mode())
			}
			again, err := PlanTrust(c, newKey.PublicKey())
			if err != nil || !again.Trusted {
				t.Errorf("after Apply: trusted %v, %v", again != nil && again.Trusted, err)
			}
		})
	}
}

// TestPlanTrustRefuses: a key trusted or refused through a line handoff
// does not edit (a wildcard, @revoked) is an error naming the line, and
// nothing is planned.
func TestPlanTrustRefuses(t *testing.T) {
	t.Parallel()
	newKey, _ := sshdtest.NewEd25519(t)
	_, oldText := pubLine(t)
	newText := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(newKey.PublicKey())))
	cfg := Config{Alias: "laptop", HostName: "127.0.0.1", Port: 2222}
	for name, text := range map[string]string{
		"wildcard": "[127.0.0.*]:2222 " + oldText + "\n",
		"revoked":  "@revoked * " + newText + "\n",
	} {
		file := filepath.Join(t.TempDir(), "known_hosts")
		os.WriteFile(file, []byte(text), 0o600)
		c := cfg
		c.KnownHostsFiles = []string{file}
		if p, err := PlanTrust(c, newKey.PublicKey()); err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: plan %+v, err %v; want an error naming %s", name, p, err, file)
		}
	}
}

// TestPlanTrustSymlink: a known_hosts that is a symlink (dotfiles) stays
// one; the file it points to is replaced.
func TestPlanTrustSymlink(t *testing.T) {
	t.Parallel()
	newKey, _ := sshdtest.NewEd25519(t)
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "known_hosts")
	os.MkdirAll(filepath.Dir(real), 0o700)
	os.WriteFile(real, []byte("# mine\n"), 0o600)
	link := filepath.Join(dir, "known_hosts")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	p, err := PlanTrust(Config{Alias: "laptop", HostName: "laptop", KnownHostsFiles: []string{link}}, newKey.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("known_hosts is no longer a symlink: %v", err)
	}
	if b, _ := os.ReadFile(real); !strings.HasPrefix(string(b), "# mine\nlaptop ssh-ed25519 ") {
		t.Errorf("target = %q", b)
	}
}
