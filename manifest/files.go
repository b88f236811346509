package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// CheckFiles looks for the local files the manifest names: each ssh
// host's identity_file and known_hosts must exist, and an identity file
// must not be accessible by group or others (OpenSSH refuses such a key,
// and so does handoff). It returns every problem as a *FieldError naming
// the file, host and field, joined like [Load]'s, or nil.
//
// Load does not call it: a sync must start even before `handoff hosts
// trust` has created known_hosts, and the manifest may be checked on a
// machine that does not hold the keys. `handoff manifest check` does.
func (m *Manifest) CheckFiles() error {
	var errs []error
	for i, h := range m.Hosts {
		if h.SSH == nil {
			continue
		}
		at := fmt.Sprintf("hosts[%d].ssh.", i)
		report := func(field, value, msg, hint string) {
			errs = append(errs, &FieldError{File: m.Path, Host: h.Name, Field: at + field, Value: value, Msg: msg, Hint: hint})
		}
		if p := h.SSH.IdentityFile; p != "" {
			st, err := os.Stat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				report("identity_file", p, fmt.Sprintf("%s does not exist", p),
					fmt.Sprintf("make a key for handoff (ssh-keygen -t ed25519 -N '' -C handoff -f %s) or fix the path", p))
			case err != nil:
				report("identity_file", p, err.Error(), "make the key readable by this user")
			case st.IsDir():
				report("identity_file", p, fmt.Sprintf("%s is a directory", p), "name the private key file")
			case st.Mode().Perm()&0o077 != 0:
				report("identity_file", p, fmt.Sprintf("%s is accessible by group or others (mode %04o); OpenSSH refuses such a key, and so does handoff", p, st.Mode().Perm()),
					fmt.Sprintf("chmod 600 %s", p))
			}
		}
		if p := h.SSH.KnownHosts; p != "" {
			st, err := os.Stat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				report("known_hosts", p, fmt.Sprintf("%s does not exist", p),
					fmt.Sprintf("run `handoff hosts trust %s`, which creates it once you confirm the host's key, or fix the path", h.Name))
			case err != nil:
				report("known_hosts", p, err.Error(), "make the file readable by this user")
			case st.IsDir():
				report("known_hosts", p, fmt.Sprintf("%s is a directory", p), "name the known_hosts file")
			}
		}
	}
	return errors.Join(errs...)
}
