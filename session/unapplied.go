package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// Unapplied is a session whose layer holds changes not yet applied to
// the project: jail-mcp diff, apply and discard list them when no
// session is named, and jail-mcp prune keeps them.
type Unapplied struct {
	Session  string    `json:"session"`
	Jail     string    `json:"jail"`
	LastUsed time.Time `json:"last_used"`
	// Paths is how many paths jail_diff lists; Ignored how many files
	// change under the directories .gitignore ignores (node_modules/).
	Paths   int `json:"paths"`
	Ignored int `json:"ignored_files"`
}

// Total is every path and file the layer changes.
func (u Unapplied) Total() int { return u.Paths + u.Ignored }

// Unapplied lists the sessions of the manager's jail base whose layers
// change the project, by when each was last used: read beside a server
// that holds one, locking nothing.
func (m *Manager) Unapplied() ([]Unapplied, error) {
	names, err := jailfs.SortedNames(m.base, ".")
	if err != nil {
		return nil, fmt.Errorf("list the jails of %s: %w", m.cfg.Root, err)
	}
	var out []Unapplied
	for _, name := range names {
		if jailfs.ValidName(name) != nil || name[0] == '.' {
			continue
		}
		fi, err := m.base.Lstat(name)
		if err != nil || !fi.IsDir() {
			continue // a symlink or a file: not a jail
		}
		jail, err := m.base.OpenRoot(name)
		if err != nil {
			continue
		}
		path := filepath.Join(m.cfg.Root, name)
		paths, ignored, err := LayerChanges(jail, path, m.cfg.Project)
		jail.Close()
		if err != nil {
			return nil, err
		}
		if paths+ignored > 0 {
			out = append(out, Unapplied{Session: name, Jail: path, LastUsed: fi.ModTime(), Paths: paths, Ignored: ignored})
		}
	}
	return out, nil
}

// LayerChanges counts what the layer of the jail at jailPath (jail, its
// root) changes in project, as jail_diff lists it: paths, and files under
// the directories .gitignore ignores; none when the jail has no layer
// (its sessions ran without the view). Neither the layer's directory
// nor its upper directory is followed through a link.
func LayerChanges(jail *os.Root, jailPath, project string) (paths, ignored int, err error) {
	for _, p := range []string{view.LayerDir, view.LayerUpper} {
		fi, err := jail.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("open the layer of %s: %w", jailPath, err)
		}
		if !fi.IsDir() {
			return 0, 0, fmt.Errorf("open the layer of %s: %s is not a directory", jailPath, p)
		}
	}
	d, err := layer.Compute(filepath.Join(jailPath, view.LayerUpper), project, layer.Options{})
	if err != nil {
		return 0, 0, fmt.Errorf("compare the layer of %s with the project: %w", jailPath, err)
	}
	for _, s := range d.Ignored {
		ignored += s.Files
	}
	return len(d.Changes), ignored, nil
}
