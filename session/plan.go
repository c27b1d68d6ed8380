package session

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// callPlan is a request checked against the operator's configuration:
// what runs, where, for how long, and under which policy.
type callPlan struct {
	argv    []string
	dir     string
	timeout time.Duration
	network bool
	allow   *egress.Policy // with network: the allowlist it is held to
	auth    []string       // the CLIs whose credentials it sees
}

// plan checks req against the configuration; every refusal is an
// *InputError but that of a backend that refuses every call.
func (s *Session) plan(req Request) (callPlan, error) {
	cfg := s.m.cfg
	var p callPlan
	var err error
	if p.argv, err = req.argv(); err != nil {
		return p, err
	}
	if p.dir, err = s.resolveCwd(req.Cwd); err != nil {
		return p, err
	}
	if err := view.CheckEnv(req.Env); err != nil {
		return p, &InputError{msg: err.Error()}
	}
	if req.Timeout < 0 {
		return p, inputErrorf("timeout must be positive")
	}
	p.timeout = min(cmp.Or(req.Timeout, cfg.Timeout), cfg.MaxTimeout)
	if req.Job {
		p.timeout = min(cmp.Or(req.Timeout, cfg.MaxJobTime), cfg.MaxJobTime)
	}
	if err := p.networkOf(cfg, req); err != nil {
		return p, err
	}
	if p.auth, err = auth.Narrow(cfg.Auth, req.Auth); err != nil {
		return p, &InputError{msg: "auth: " + err.Error()}
	}
	if jail.IsRefusing(cfg.Backend) {
		_, err := cfg.Backend.Runner(jail.Spec{}, nil)
		return p, err
	}
	if p.allow != nil && (cfg.Backend.Egress() != nil || !cfg.Backend.Agents()) {
		// Never the whole network for an allowlist (fail closed).
		err := cmp.Or(cfg.Backend.Egress(), jail.ErrNoEgress)
		return p, &InputError{msg: "network: " + err.Error()}
	}
	return p, nil
}

// networkOf sets the call's network: the operator's, turned off or
// narrowed to an allowlist by the request, never widened.
func (p *callPlan) networkOf(cfg Config, req Request) error {
	p.network, p.allow = cfg.Network, cfg.Allow
	if req.Network != nil {
		if *req.Network && !cfg.Network {
			return inputErrorf("network: the operator turned network off (--network off); a call can turn it off, never on")
		}
		p.network = *req.Network
		if !p.network {
			p.allow = nil
		}
	}
	if req.Allow == nil {
		return nil
	}
	switch {
	case !p.network:
		return inputErrorf("allow: network is off for this call; an allowlist narrows network that is on")
	case len(req.Allow) == 0:
		return inputErrorf("allow: an empty list; give network: false to cut network")
	}
	sub, err := egress.Parse(strings.Join(req.Allow, ","))
	if err != nil {
		return inputErrorf("allow: %v", err)
	}
	if p.allow != nil {
		if sub, err = p.allow.Narrow(sub); err != nil {
			return inputErrorf("allow: %v", err)
		}
	}
	p.allow = &sub
	return nil
}

func (r Request) argv() ([]string, error) {
	switch {
	case r.Command != "" && len(r.Argv) > 0:
		return nil, ErrCommandAndArgv
	case r.Command != "":
		if strings.IndexByte(r.Command, 0) >= 0 {
			return nil, inputErrorf("command contains a NUL byte")
		}
		return []string{"/bin/sh", "-c", r.Command}, nil
	case len(r.Argv) > 0:
		if r.Argv[0] == "" {
			return nil, inputErrorf("argv[0] is empty")
		}
		for i, a := range r.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, inputErrorf("argv[%d] contains a NUL byte", i)
			}
		}
		return r.Argv, nil
	}
	return nil, inputErrorf("give one of command (a shell line) or argv (a program and its arguments)")
}

// resolveCwd resolves cwd against the project, follows symlinks, and
// accepts it only inside this session's jail or inside the project outside
// every jail.
func (s *Session) resolveCwd(cwd string) (string, error) {
	project := s.m.cfg.Project
	if cwd == "" {
		return project, nil
	}
	if strings.IndexByte(cwd, 0) >= 0 {
		return "", inputErrorf("cwd contains a NUL byte")
	}
	p := cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(project, p)
	}
	canon, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", inputErrorf("cwd %q: no such directory", cwd)
	}
	fi, err := os.Stat(canon)
	if err != nil || !fi.IsDir() {
		return "", inputErrorf("cwd %q: not a directory", cwd)
	}
	switch {
	case jail.Within(canon, s.Path):
		return canon, nil
	case jail.Within(canon, s.m.cfg.Root) || jail.Within(canon, filepath.Join(project, BaseName)):
		return "", inputErrorf("cwd %q: inside the jail base but not this session's jail %s", cwd, s.Path)
	case jail.Within(canon, project):
		return canon, nil
	}
	return "", inputErrorf("cwd %q: outside the project %s and the session's jail", cwd, project)
}
