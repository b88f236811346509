package setup

import (
	"sync"

	"github.com/handoff-sync/handoff/manifest"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// MaxHandedSSHConfig bounds the ssh_config a run hands its workers
// (HandedSSHConfig); a bigger one each worker reads itself.
const MaxHandedSSHConfig = 64 << 10

// sshConfigs are the ~/.ssh/config files this process has read, by path
// (HOME may change in between, as the demo changes it): the first host
// resolved reads the file and every later one, their jump hosts and
// CheckKeys included, looks it up in the same copy. A worker is handed
// its run's copy (UseSSHConfig) and reads none. A change to the file
// during a run is seen by the next run.
var sshConfigs struct {
	mu    sync.Mutex
	files map[string]*sshfs.ConfigFile
}

// readSSHConfig reads ~/.ssh/config (a variable for the tests).
var readSSHConfig = func() (*sshfs.ConfigFile, error) { return sshfs.ReadConfigFile("") }

// userSSHConfig is ~/.ssh/config as this process read it, reading it the
// first time. A file that could not be read is not kept: Resolve reads it
// again and says why it cannot.
func userSSHConfig() *sshfs.ConfigFile {
	path := sshfs.UserConfigPath()
	sshConfigs.mu.Lock()
	defer sshConfigs.mu.Unlock()
	if f := sshConfigs.files[path]; f != nil {
		return f
	}
	f, err := readSSHConfig()
	if err != nil || f.Path != path {
		return nil
	}
	if sshConfigs.files == nil {
		sshConfigs.files = map[string]*sshfs.ConfigFile{}
	}
	sshConfigs.files[path] = f
	return f
}

// HandedSSHConfig is the ~/.ssh/config a worker pulling h is to resolve
// it with (UseSSHConfig): nil for a host that is not SSH, or when the
// file could not be read or is over MaxHandedSSHConfig, and the worker
// reads it itself.
func HandedSSHConfig(h manifest.HostConfig) *sshfs.ConfigFile {
	if h.Transport != manifest.TransportSSH {
		return nil
	}
	f := userSSHConfig()
	if f == nil || len(f.Data) > MaxHandedSSHConfig {
		return nil
	}
	return f
}

// UseSSHConfig makes f, the ~/.ssh/config the run read (HandedSSHConfig),
// this process's copy, unless HOME names another file here.
func UseSSHConfig(f *sshfs.ConfigFile) {
	if f == nil || f.Path != sshfs.UserConfigPath() {
		return
	}
	sshConfigs.mu.Lock()
	defer sshConfigs.mu.Unlock()
	if sshConfigs.files == nil {
		sshConfigs.files = map[string]*sshfs.ConfigFile{}
	}
	sshConfigs.files[f.Path] = f
}
