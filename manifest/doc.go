// Package manifest reads the writers manifest: the YAML file that tells
// handoff which hosts to pull memory handoffs from, how to reach them, and
// where their inboxes are.
//
// [Load] and [Parse] promise the following about a manifest they return
// without error:
//
//   - Parsing is strict. An unknown or misspelt key (keys are matched
//     exactly, case included), a value of the wrong type, and a key given
//     twice in one mapping are errors, never silently ignored.
//   - Every validation rule listed below holds. All problems are reported
//     at once, joined with [errors.Join]; each is a
//     [*FieldError] that names the file, the host (when there is one) and
//     the field path, such as hosts[1].ssh.port, and carries a hint saying
//     what to do. YAML syntax and duplicate-key errors carry the line the
//     YAML parser reported.
//   - Defaults are applied: [Manifest.Defaults] has every field set, with
//     the built-in value wherever the file was silent, and [Manifest.Workspace]
//     is never empty. Per-host overrides stay as written in [Host];
//     [Manifest.HostConfigs] resolves them into complete [HostConfig] values.
//   - Inbox and discovery paths are cleaned with [path.Clean] and are either
//     absolute or start with "~". They keep their "~", because on a remote
//     host "~" is that login's home: the caller expands them with
//     [ExpandHome] once the transport knows the home directory.
//   - Local paths (the workspace, ssh.identity_file and ssh.known_hosts) are
//     expanded against the local home directory; the workspace as written is
//     kept in [Manifest.WorkspaceRaw].
//   - An ssh port of 0 means "unset": ssh_config or port 22 decides, not this
//     package.
//
// The validation rules are:
//
//   - version is 1, and there is at least one host.
//   - A host name is present, unique and matches
//     ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$.
//   - transport is "local" or "ssh"; a local host has no ssh block; an ssh
//     host has ssh.host, with no spaces and no "@" (the login goes in
//     ssh.user); ssh.port is 0 (unset) to 65535; ssh.connect_timeout, when
//     set, is more than 0.
//   - A harness is a single path component starting with a dot, such as
//     .claude. A harness list, when given, is not empty.
//   - max_depth is 0 to 16; max_file_size is 1 byte to 64MiB; settle is not
//     negative; timeout is more than 0 and at most 24h;
//     defaults.review_max_age (the workspace's, not a host's) is more than
//     0 and at most 365d.
//   - A host has at least one inbox or discovery root. Those paths, the
//     workspace, ssh.identity_file and ssh.known_hosts are absolute or start
//     with "~/" (or are "~") once cleaned, and an inbox path ends in
//     memory-handoffs. No harness, inbox or discovery root is listed twice.
//   - notify.ping_url is an http or https URL with a host.
package manifest
