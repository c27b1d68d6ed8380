package session

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"
)

// The servers of one user name their projects' jails in a directory of
// that user's (registryDir), one symlink each: every session hides the
// jails of every other project it finds there (jail.Spec.Jails), not
// only its own project's others. A command cannot write there.

// registryDir is where the servers of the user whose home is home and
// whose XDG_STATE_HOME getenv gives name their projects' jails.
func registryDir(home string, getenv func(string) string) string {
	state := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		if !filepath.IsAbs(home) {
			return ""
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "jail-mcp", "jails")
}

// register names jails, the directory of a project's jails, in the
// registry dir: a symlink named by its hash, made aside and renamed into
// place. Entries whose directory is gone are removed.
func register(dir, jails string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(jails))
	name := filepath.Join(dir, hex.EncodeToString(sum[:8]))
	if to, err := os.Readlink(name); err != nil || to != jails {
		tmp := filepath.Join(dir, ".new-"+uuid.NewString())
		if err := os.Symlink(jails, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, name); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	for _, e := range registered(dir) {
		if fi, err := os.Stat(e.jails); err != nil || !fi.IsDir() {
			os.Remove(e.link)
		}
	}
	return nil
}

type registryEntry struct{ link, jails string }

// registered lists the registry's entries.
func registered(dir string) []registryEntry {
	entries, _ := os.ReadDir(dir)
	var out []registryEntry
	for _, e := range entries {
		link := filepath.Join(dir, e.Name())
		if to, err := os.Readlink(link); err == nil && filepath.IsAbs(to) {
			out = append(out, registryEntry{link: link, jails: to})
		}
	}
	return out
}

// otherJails are the jails' directories of the other projects the
// registry names, but one that holds mine (a server run in a jail).
func otherJails(dir, mine string) []string {
	var out []string
	for _, e := range registered(dir) {
		if e.jails != mine && !within(mine, e.jails) && !slices.Contains(out, e.jails) {
			out = append(out, e.jails)
		}
	}
	return out
}
