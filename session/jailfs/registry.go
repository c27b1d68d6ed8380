package jailfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/jail"
)

// The servers of one user name their projects' jails in a directory of
// that user's (RegistryDir), one symlink each: every session hides the
// jails of every other project it finds there (jail.Spec.Jails), not
// only its own project's others. A command cannot write there (the
// runtime directory and /tmp are hidden from it, and read-only).

// RegistryDir is where the servers of this user name their projects'
// jails: in XDG_RUNTIME_DIR, else in a directory of the user's own in
// TMPDIR (or /tmp), as getenv gives them. Servers that see different
// ones do not hide each other's jails.
func RegistryDir(getenv func(string) string) string {
	if rt := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		return filepath.Join(rt, "jail-mcp", "jails")
	}
	tmp := getenv("TMPDIR")
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, fmt.Sprintf("jail-mcp-%d", os.Geteuid()), "jails")
}

// ownDir makes dir, or checks it: a directory (not a link) of this user
// that no one else may write.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !ownedByMe(fi) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a directory of this user's that only it writes", dir)
	}
	return nil
}

// Register names jails, the directory of a project's jails, in the
// registry dir: a symlink named by its hash, made aside and renamed into
// place. Entries whose directory is gone are removed.
func Register(dir, jails string) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := ownDir(d); err != nil {
			return err
		}
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
	for _, e := range jail.ReadRegistry(dir) {
		if fi, err := os.Stat(e.Jails); err != nil || !fi.IsDir() {
			os.Remove(e.Link)
		}
	}
	return nil
}

// OtherJails are the jails' directories of the other projects the
// registry names, but one that holds mine (a server run in a jail).
func OtherJails(dir, mine string) []string {
	var out []string
	for _, e := range jail.ReadRegistry(dir) {
		if e.Jails != mine && !jail.Within(mine, e.Jails) && !slices.Contains(out, e.Jails) {
			out = append(out, e.Jails)
		}
	}
	return out
}
