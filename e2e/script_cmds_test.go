package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// scriptCmds are the commands the CLI scripts may use beyond testscript's.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"sshd":       cmdSSHD,
	"closedport": cmdClosedPort,
	"sshagent":   cmdSSHAgent,
}

// scriptT is the key of the script's own testing.TB in Env.Values.
type scriptT struct{}

// cmdSSHD starts a real OpenSSH server on 127.0.0.1 for the rest of the
// script: sshd NAME [nopubkey] [readonly]. It sets NAME_HOST, NAME_PORT, NAME_USER,
// NAME_KEY (an identity file the server accepts, mode 0600), NAME_PUB (its
// public half), NAME_KNOWN_HOSTS (trusting the server's host keys) and
// NAME_AUTHKEYS (the authorized_keys file, to which a script may add keys).
// nopubkey turns public-key logins off; readonly serves SFTP read-only. Without sshd the script is
// skipped, or fails under HANDOFF_E2E_REQUIRED.
func cmdSSHD(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: sshd NAME [nopubkey] [readonly]")
	}
	opts := sshdtest.Options{}
	for _, a := range args[1:] {
		switch a {
		case "nopubkey":
			opts.NoPublicKey = true
		case "readonly":
			opts.ReadOnly = true
		default:
			ts.Fatalf("sshd: unknown option %q", a)
		}
	}
	tb, ok := ts.Value(scriptT{}).(testing.TB)
	if !ok {
		ts.Fatalf("sshd: the script's T is not a testing.TB")
	}
	srv := sshdtest.StartOpenSSH(tb, opts)
	name := args[0]
	for k, v := range map[string]string{
		"HOST": srv.Host, "PORT": strconv.Itoa(srv.Port), "USER": srv.User,
		"KEY": srv.IdentityFile, "PUB": srv.IdentityFile + ".pub", "KNOWN_HOSTS": srv.KnownHosts,
		"AUTHKEYS": filepath.Join(filepath.Dir(srv.IdentityFile), "authorized_keys"),
	} {
		ts.Setenv(strings.ToUpper(name)+"_"+k, v)
	}
}

// cmdClosedPort sets VAR to a 127.0.0.1 port that nothing listens on: one
// the kernel just handed out and that was closed again.
func cmdClosedPort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: closedport VAR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.Fatalf("closedport: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ts.Setenv(args[0], fmt.Sprint(port))
}

// cmdSSHAgent serves an ssh-agent from the test process for the rest of
// the script, holding the private keys in the files named, and sets
// SSH_AUTH_SOCK to its socket: sshagent KEYFILE...
func cmdSSHAgent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: sshagent KEYFILE...")
	}
	keys := agent.NewKeyring()
	for _, f := range args {
		b, err := os.ReadFile(ts.MkAbs(f))
		ts.Check(err)
		raw, err := ssh.ParseRawPrivateKey(b)
		ts.Check(err)
		ts.Check(keys.Add(agent.AddedKey{PrivateKey: raw}))
	}
	dir, err := os.MkdirTemp("", "agent") // a short path: sockets allow 108 bytes
	ts.Check(err)
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	ts.Check(err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keys, c)
			}()
		}
	}()
	ts.Defer(func() {
		ln.Close()
		<-done
		os.RemoveAll(dir)
	})
	ts.Setenv("SSH_AUTH_SOCK", sock)
}
