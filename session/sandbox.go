package session

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// ownRunner is the runner of a command on its own (a backend without
// session agents), its credentials bound for it; done releases it.
func (s *Session) ownRunner(call jail.Call, p callPlan, exps []auth.Exposure) (r jail.Runner, done func(), err error) {
	spec := s.sandboxSpec(call.Dir, p.network, exps)
	spec.Argv, spec.Env = call.Argv, call.Env
	opened, err := s.sandboxFiles(&spec, exps)
	if err == nil {
		if r, err = s.m.cfg.Backend.Runner(spec, nil); err != nil {
			err = fmt.Errorf("prepare %s: %w", spec, err)
		}
	}
	if err != nil {
		closeAll(opened)
		return nil, nil, err
	}
	return r, func() { r.Close(); closeAll(opened) }, nil
}

// sandboxSpec is what every sandbox of the session holds, a command's
// own or a session agent's, running in dir with the network or not: the
// jail, what it sees of the host and what it never reads (the deny list,
// credentials not exposed in exps, other jails), the bound on its memory.
func (s *Session) sandboxSpec(dir string, network bool, exps []auth.Exposure) jail.Spec {
	cfg := s.m.cfg
	spec := jail.Spec{Dir: dir, Jail: s.Path, Network: network, Visible: []string{cfg.Project, cfg.Home}, Siblings: filepath.Dir(s.Path), Project: cfg.Project, MaxMemory: cfg.MaxMemory}
	spec.Unread, spec.Visible = s.unread(exps, spec.Visible)
	spec.Jails = s.m.registry
	return spec
}

// sandboxFiles gives spec the descriptors of a sandbox: the jail's, the
// project's writable directories', and under a backend that binds them
// the credentials of exps; the caller closes what it returns once the
// sandbox has them, also on an error.
func (s *Session) sandboxFiles(spec *jail.Spec, exps []auth.Exposure) ([]*os.File, error) {
	var opened []*os.File
	jf, err := s.openJail()
	if err != nil {
		return nil, err
	}
	if jf != nil {
		opened = append(opened, jf)
		spec.JailFile = jf
	}
	if err := s.viewFiles(spec, &opened); err != nil {
		return opened, err
	}
	// Each sandbox opens them anew, without following a link: one the
	// host removed since is made again.
	for _, w := range s.m.cfg.Writable {
		f, err := jailfs.OpenWritable(s.m.cfg.Project, w, true)
		if err != nil {
			return opened, fmt.Errorf("open writable directory %s: %w", w, err)
		}
		opened = append(opened, f)
		spec.Writable = append(spec.Writable, jail.WritableDir{Path: w, File: f})
	}
	if s.m.cfg.Backend.Credentials() == jail.BindCredentials {
		if err := s.creds.Bind(spec, exps, &opened); err != nil {
			return opened, fmt.Errorf("expose credentials: %w", err)
		}
	}
	return opened, nil
}

// openJail opens the jail by a descriptor, without following a link (its
// parent is read-only to commands; this keeps it so).
func (s *Session) openJail() (*os.File, error) {
	jf, err := jailfs.OpenPath(s.m.base, s.Name)
	if err != nil {
		return nil, fmt.Errorf("open jail %s: %w", s.Path, err)
	}
	if jf != nil {
		if fi, err := jf.Stat(); err != nil || !fi.IsDir() {
			jf.Close()
			return nil, fmt.Errorf("open jail %s: not a directory", s.Path)
		}
	}
	return jf, nil
}
