package demo

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/internal/sshserve"
)

// Server is an embedded SSH server on 127.0.0.1 that serves the "sftp"
// subsystem over the real file system and nothing else. It accepts one
// client public key, for any user name.
type Server struct {
	// Addr is where it listens: 127.0.0.1:port.
	Addr string
	Port int
	// HostKey is the server's generated ed25519 host key.
	HostKey ssh.PublicKey

	srv *sshserve.Server
}

// StartServer starts a server that authenticates exactly the client key
// and gives SFTP sessions workDir as their login directory.
func StartServer(client ssh.PublicKey, workDir string) (*Server, error) {
	if client == nil {
		return nil, errors.New("demo: server: no client key")
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("demo: server: host key: %w", err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("demo: server: host key: %w", err)
	}
	config := &ssh.ServerConfig{MaxAuthTries: 3, PublicKeyCallback: sshserve.AuthorizedKey(client)}
	config.AddHostKey(hostKey)
	srv, err := sshserve.Start(context.Background(), sshserve.Config{SSH: config, SFTP: sshserve.ServeDir(workDir)})
	if err != nil {
		return nil, fmt.Errorf("demo: server: %w", err)
	}
	return &Server{Addr: srv.Addr().String(), Port: srv.Addr().Port, HostKey: hostKey.PublicKey(), srv: srv}, nil
}

// Close stops listening, closes every connection and waits until all
// sessions have ended. It is safe to call more than once.
func (s *Server) Close() error {
	return s.srv.Close()
}
