package creds

import (
	"log/slog"
	"os"
	"sync"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
)

// Jail is the credentials of one session's jail: what is placed in it,
// its state copies, and the placeholders of its masked credentials.
type Jail struct {
	h    *Host
	root *os.Root // the jail's
	path string   // the jail, absolute on the host
	name string   // the session's, for the log
	log  *slog.Logger

	// mu serialises the credential work of starting calls, and guards
	// placed: the credentials placed in the jail for running calls, by
	// jail-relative path, under backends that place them rather than
	// bind them.
	mu     sync.Mutex
	placed map[string]*placement

	// plain is how the files of a CLI that is not masked reach the jail;
	// masked, by name, how those of each masked CLI do. Chosen at Open.
	plain  way
	masked map[string]way
	// mask is what the session masks beyond the CLIs' files: nothing, or
	// variables, the bundle of roots and the proxies' table (mask.go).
	mask masker
}

// way is how the credential files of one CLI reach the jail: the host's
// files themselves (plainWay), or masked copies (maskedWay). rel and dst
// are relative to the jail; target is rel's place in a sandbox.
type way interface {
	// bind binds the host credential host, at rel in the jail,
	// read-only at target in the sandbox spec, by a descriptor it adds
	// to opened.
	bind(spec *jail.Spec, host, rel, target string, opened *[]*os.File) error
	// place puts the host credential host at dst in the jail: a link to
	// it (link) or a copy.
	place(host, dst string, link bool) error
	// copyState writes a fresh copy of the host state file src at dst,
	// aside first.
	copyState(src, dst string) error
	// intact reports whether it, placed as a link, is still as place
	// left it, to be kept for the next call.
	intact(it auth.Item) bool
	// refresh writes again the copies of it that running sandboxes have
	// bound, so that they see the host's latest.
	refresh(it auth.Item) error
}

// Open returns the credentials of the session name's jail, root at path,
// with the way of each CLI's files and the session's masking chosen, and
// copies the host's state of the enabled CLIs into it.
func (h *Host) Open(root *os.Root, path, name string) *Jail {
	j := &Jail{h: h, root: root, path: path, name: name, log: h.log, mask: noMask{}}
	j.plain = plainWay{j}
	if h.masking != nil {
		sm := newSessionMask(j, h.masking)
		j.mask = sm
		j.masked = map[string]way{}
		for n, hosts := range h.cfg.Mask.CLIs {
			j.masked[n] = &maskedWay{j: j, sm: sm, name: n, hosts: hosts}
		}
	}
	j.refreshState()
	return j
}

// way is how the files of the CLI called name reach the jail.
func (j *Jail) way(name string) way {
	if c, ok := j.masked[name]; ok {
		return c
	}
	return j.plain
}
