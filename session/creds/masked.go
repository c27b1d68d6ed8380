package creds

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// maskedWay shows a masked CLI's files as copies that hold the session's
// placeholders in place of their secrets, kept in the state directory
// (maskedRel) and bound read-only, or placed in the jail; the real
// values stay in the server.
type maskedWay struct {
	j     *Jail
	sm    *sessionMask
	name  string    // the CLI's
	hosts MaskHosts // where its credentials may go
}

// bind binds the masked copy of the host credential host read-only at
// target, by descriptor: the copy is written in the state directory
// (maskedRel of rel), and rewritten in place by each call after
// (refresh), so that a running sandbox sees the host's latest.
func (w *maskedWay) bind(spec *jail.Spec, host, rel, target string, opened *[]*os.File) error {
	j := w.j
	src := maskedRel(w.name, rel)
	if err := j.ensureDirs(path.Dir(src)); err != nil {
		return fmt.Errorf("prepare %s: %w", src, err)
	}
	if err := w.write(host, src); err != nil {
		return fmt.Errorf("mask %s: %w", host, err)
	}
	f, err := jailfs.OpenPath(j.root, src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	*opened = append(*opened, f)
	spec.Mounts = append(spec.Mounts, jail.Mount{Source: filepath.Join(j.path, src), Target: target, File: f})
	return nil
}

// place writes the masked copy of host at dst, link or not: the jail
// holds placeholders only, a copy of its own.
func (w *maskedWay) place(host, dst string, _ bool) error { return w.write(host, dst) }

// copyState writes the masked copy of the host state file src to dst,
// aside first.
func (w *maskedWay) copyState(src, dst string) error {
	tmp := dst + ".new"
	if err := w.write(src, tmp); err != nil {
		return err
	}
	return w.j.root.Rename(tmp, dst)
}

// intact is false: masked copies are made again by every call, the
// host's latest.
func (w *maskedWay) intact(auth.Item) bool { return false }

// refresh rewrites in place the masked copies of it bound into the
// session's sandboxes (bind), so that a sandbox started earlier sees the
// host's latest (a token the operator's CLI refreshed, its new expiry).
func (w *maskedWay) refresh(it auth.Item) error {
	w.j.mu.Lock()
	defer w.j.mu.Unlock()
	var err error
	if !it.State {
		err = w.rewrite(it.Host, it.Rel)
	}
	for _, sec := range it.Secrets {
		err = errors.Join(err, w.rewrite(sec.Host, path.Join(filepath.ToSlash(it.Rel), sec.Name)))
	}
	return err
}

// rewrite writes the masked copy of host again where a sandbox has it
// bound; none is made where there is none.
func (w *maskedWay) rewrite(host, rel string) error {
	dst := maskedRel(w.name, rel)
	if _, err := w.j.root.Lstat(dst); err != nil {
		return nil
	}
	return w.write(host, dst)
}

// maskedRel is where a masked copy bound into sandboxes is kept, in the
// state directory (hidden from commands).
func maskedRel(cli, rel string) string {
	return path.Join(StateDir, "masked", cli, filepath.ToSlash(rel))
}

// maxMaskedDepth bounds the directories of a credential directory a
// masked copy follows.
const maxMaskedDepth = 4

// write writes the masked copy of the host credential file or
// directory host at dst in the jail, through os.Root: a file in
// place of what is there (one a sandbox has bound is rewritten in place,
// so that it sees the host's latest), a directory with the masked copies
// of its settings files (settingsFile), its subdirectories to
// maxMaskedDepth.
func (w *maskedWay) write(host, dst string) error {
	return w.writeAt(host, dst, 0)
}

func (w *maskedWay) writeAt(host, dst string, depth int) error {
	j := w.j
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		b, err := readCredential(host)
		if err != nil {
			return err
		}
		masked, err := w.maskContent(host, b)
		if err != nil {
			return err
		}
		return j.writeInPlace(dst, masked)
	}
	if dfi, err := j.root.Lstat(dst); err != nil || !dfi.IsDir() {
		if err := j.root.RemoveAll(dst); err != nil {
			return err
		}
		if err := j.root.Mkdir(dst, 0o700); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(host)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src := filepath.Join(host, e.Name())
		switch {
		case e.IsDir() && depth < maxMaskedDepth:
			err = w.writeAt(src, path.Join(dst, e.Name()), depth+1)
		case e.Type().IsRegular() && settingsFile(src):
			err = w.writeAt(src, path.Join(dst, e.Name()), depth+1)
		}
		if err != nil {
			// Left out of the copy, never copied unmasked: one file the
			// server cannot mask costs the jail that file only.
			j.log.Warn("a credential file is left out of the jail's masked copy", "session", j.name, "cli", w.name, "path", src, "err", err)
			j.root.RemoveAll(path.Join(dst, e.Name()))
		}
	}
	return nil
}

// maskContent is content (the host file host) with each secret it holds
// replaced by the session's placeholder.
func (w *maskedWay) maskContent(host string, content []byte) ([]byte, error) {
	cli, h, sm := w.name, w.hosts, w.sm
	name := filepath.Base(host)
	out, _, err := auth.MaskFile(name, content, func(f auth.Field) (string, error) {
		hosts := h.Hosts
		if f.Host != "" {
			hosts = []string{strings.ToLower(f.Host)}
		}
		key := f.Key
		return sm.placeholder(cli+"\x00"+host+"\x00"+key, f.Value, egress.Secret{
			Name: cli + " " + w.j.h.homeRel(host) + " " + key, Hosts: hosts, TokenPaths: h.TokenPaths,
			NoRefresh: h.Rotates && f.Kind == "refresh",
			Value: func() (string, error) {
				b, err := sm.hostFile(host)
				if err != nil {
					return "", err
				}
				if v, ok := auth.FieldValue(name, b, key); ok {
					return v, nil
				}
				return "", fmt.Errorf("%s holds no %s any more", host, key)
			},
		})
	})
	return out, err
}

// maxCredentialFile bounds a credential file the server masks: what is
// larger is no credential file.
const maxCredentialFile = 1 << 20

// readCredential reads a host credential file, bounded.
func readCredential(host string) ([]byte, error) {
	f, err := os.Open(host)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialFile+1))
	if err == nil && len(b) > maxCredentialFile {
		err = fmt.Errorf("%s: larger than %d bytes, not a credential file", host, maxCredentialFile)
	}
	return b, err
}

// hostFile is the content of the host credential file host, read again
// only when it changed (the proxy asks for every secret's value on every
// request, to scan the answers).
func (sm *sessionMask) hostFile(host string) ([]byte, error) {
	fi, err := os.Stat(host)
	if err != nil {
		return nil, err
	}
	sm.mu.Lock()
	c, ok := sm.files[host]
	sm.mu.Unlock()
	if ok && os.SameFile(c.fi, fi) && c.fi.ModTime().Equal(fi.ModTime()) && c.fi.Size() == fi.Size() {
		return c.b, nil
	}
	b, err := readCredential(host)
	if err != nil {
		return nil, err
	}
	sm.mu.Lock()
	sm.files[host] = hostFile{fi: fi, b: b}
	sm.mu.Unlock()
	return b, nil
}

// hostFile is a host credential file as last read.
type hostFile struct {
	fi os.FileInfo
	b  []byte
}
