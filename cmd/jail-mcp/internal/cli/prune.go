package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/layer"
)

// prune is "jail-mcp prune": it lists the project's jails with when each
// was last used, and with --remove deletes those unused for --older-than
// that no running server holds. Nothing is removed without --remove.
func prune(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := NewFlagSet("prune")
	keep := []string{"project", "root"}
	var skip []string
	for _, o := range options {
		if !slices.Contains(keep, o.flag) {
			skip = append(skip, o.flag)
		}
	}
	rc := BindConfig(fs, getenv, skip...)
	older := fs.String("older-than", "720h", "`DUR`: a jail unused for this long is old (default 30 days)")
	remove := fs.Bool("remove", false, "remove the old jails no running server holds (otherwise only list them)")
	force := fs.Bool("force", false, "with --remove, remove old jails whose project changes were never applied too (jail-mcp diff shows them)")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	if err := ParseFlags(fs, args, "jail-mcp prune [--project DIR] [--older-than DUR] [--remove [--force]] [--json]", stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError("prune: unexpected argument %q", fs.Arg(0))
	}
	age, err := duration(strings.TrimSpace(*older))
	if err != nil {
		return UsageError("invalid --older-than %q: %v", *older, err)
	}
	cfg, err := rc.Parse(fs)
	if err != nil {
		return UsageError("%v", err)
	}
	if *force && !*remove {
		return UsageError("prune: --force goes with --remove")
	}
	if _, err := os.Lstat(cfg.Root); errors.Is(err, os.ErrNotExist) {
		if *asJSON {
			fmt.Fprintln(stdout, "[]")
		} else {
			fmt.Fprintf(stdout, "no jails in %s\n", cfg.Root)
		}
		return nil
	}
	entries, err := jailfs.Prune(cfg.Root, jailfs.PruneOptions{
		OlderThan: age, Remove: *remove, Force: *force, Now: time.Now(),
		Unapplied: func(jail *os.Root, path string) (int, error) {
			paths, ignored, err := session.LayerChanges(jail, path, cfg.Project)
			return paths + ignored, err
		},
	})
	if err != nil {
		return fmt.Errorf("prune %s: %w", cfg.Root, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if entries == nil {
			entries = []jailfs.PruneEntry{}
		}
		return enc.Encode(entries)
	}
	if len(entries) == 0 {
		fmt.Fprintf(stdout, "no jails in %s\n", cfg.Root)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tLAST USED\tSIZE\tUNAPPLIED\tSTATE")
	var old, removed, kept int
	for _, e := range entries {
		state := "kept"
		switch {
		case e.Removed:
			state = "removed"
			removed++
		case e.Err != "":
			state = "error: " + e.Err
		case e.InUse:
			state = "in use by a running server"
		case e.Old && e.Unapplied > 0 && !*force:
			state = "old, kept: its changes were never applied (jail-mcp diff --session " + e.Name + "; --remove --force removes it)"
			kept++
		case e.Old && !*remove:
			state = "old: --remove removes it"
			old++
		}
		unapplied := "-"
		if e.Unapplied > 0 {
			unapplied = layer.Plural(e.Unapplied, "change")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s in %d files\t%s\t%s\n", e.Name, humanize.Time(e.LastUsed), humanize.IBytes(uint64(e.Bytes)), e.Files, unapplied, state)
	}
	tw.Flush()
	switch {
	case *remove:
		fmt.Fprintf(stdout, "%d removed (unused for %v, held by no server)\n", removed, age)
	case old > 0:
		fmt.Fprintf(stdout, "%d unused for %v or more; jail-mcp prune --remove removes them\n", old, age)
	}
	if kept > 0 {
		fmt.Fprintf(stdout, "%d old but kept: their layers hold project changes never applied (jail-mcp diff, apply, discard; --remove --force removes them)\n", kept)
	}
	return nil
}
