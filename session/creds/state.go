package creds

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jail-mcp/jail-mcp/auth"
)

// StateDir holds the per-session copies of the files CLIs rewrite at start
// (auth.Path.State), one directory per CLI. It is hidden from commands; the
// copies are shown at their places only to calls that enable their CLI.
const StateDir = ".jail-mcp/state"

// refreshState copies the host's state of the enabled CLIs into the
// session's state directory, replacing older copies; nothing flows back.
// A copy a server left placed is taken back first.
func (j *Jail) refreshState() {
	for _, e := range j.h.Exposed() {
		w := j.way(e.Name)
		for _, it := range e.Items {
			if it.State {
				j.adoptState(e.Name, it)
				if err := j.copyState(w, e.Name, it); err != nil {
					j.log.Warn("copy credential state", "session", j.name, "cli", e.Name, "path", it.Rel, "err", err)
				}
			}
		}
	}
}

// ensureState copies the host's state when the session has none yet (a
// reset removed it, or the host's appeared after the session opened).
func (j *Jail) ensureState(w way, cli string, it auth.Item) error {
	fi, err := j.root.Lstat(statePath(cli, it.Rel))
	if err == nil && fi.IsDir() == it.Dir && (fi.IsDir() || fi.Mode().IsRegular()) {
		return nil
	}
	if err == nil {
		if err := j.removeAll(statePath(cli, it.Rel)); err != nil {
			return err
		}
	}
	return j.copyState(w, cli, it)
}

func statePath(cli, rel string) string { return path.Join(StateDir, cli, filepath.ToSlash(rel)) }

// copyState writes a fresh copy of a host state file of cli (w its way)
// into the state directory: written aside, then renamed, all through
// os.Root, its secrets masked when cli's credentials are. For a state
// directory, the host directory's top-level settings (settingsFile) other
// than its secrets are copied into the session's directory, over older
// copies; files the session made there stay, and subdirectories (caches,
// logs, transcripts) are not carried.
func (j *Jail) copyState(w way, cli string, it auth.Item) error {
	dst := statePath(cli, it.Rel)
	if it.Dir {
		if err := j.ensureDirs(dst); err != nil {
			return err
		}
		entries, err := os.ReadDir(it.Host)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || isSecret(it, e.Name()) || !settingsFile(filepath.Join(it.Host, e.Name())) {
				continue
			}
			if err := w.copyState(filepath.Join(it.Host, e.Name()), path.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if err := j.ensureDirs(path.Dir(dst)); err != nil {
		return err
	}
	return w.copyState(it.Host, dst)
}

// MaxSettingsFile bounds a file copied from a CLI's state directory:
// settings are small; what is larger is data.
const MaxSettingsFile = 1 << 20

// notSettings are the names of what a CLI's state directory holds besides
// its settings: databases and their journals, logs, histories.
var notSettings = []string{".db", ".sqlite", ".sqlite3", "-wal", "-shm", "-journal", ".log", ".jsonl", ".lock", ".pid", ".sock"}

// settingsFile reports whether a top-level file of a CLI's state
// directory is settings, worth a copy per session: at most
// MaxSettingsFile bytes, not named like a database, journal, log, history
// or lock, and not an SQLite database by its header.
func settingsFile(path string) bool {
	name := strings.ToLower(filepath.Base(path))
	if strings.Contains(name, ".log.") || slices.ContainsFunc(notSettings, func(suffix string) bool { return strings.HasSuffix(name, suffix) }) {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxSettingsFile {
		return false
	}
	var head [16]byte
	n, _ := io.ReadFull(f, head[:])
	return string(head[:n]) != "SQLite format 3\x00"
}

func isSecret(it auth.Item, name string) bool {
	for _, sec := range it.Secrets {
		if sec.Name == name {
			return true
		}
	}
	return false
}

// adoptState takes a state copy found in place back to the state
// directory when the state directory has none: what a server that ended
// without taking it out (killed, with the copy placed between calls)
// left there, with what the CLI kept in it since. Its secrets, links to
// the host, go first. What is not of the state's kind stays, to give way
// to the credential. At a session's open, before its state is refreshed.
func (j *Jail) adoptState(cli string, it auth.Item) {
	rel, src := filepath.ToSlash(it.Rel), statePath(cli, it.Rel)
	if _, err := j.root.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	fi, err := j.root.Lstat(rel)
	if err != nil || fi.IsDir() != it.Dir || !(fi.IsDir() || fi.Mode().IsRegular()) {
		return
	}
	for _, sec := range it.Secrets {
		if err := j.root.RemoveAll(path.Join(rel, sec.Name)); err != nil {
			return
		}
	}
	if j.ensureDirs(path.Dir(src)) == nil {
		j.root.Rename(rel, src)
	}
}
