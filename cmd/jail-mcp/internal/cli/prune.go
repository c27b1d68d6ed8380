package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/jail-mcp/jail-mcp/session/jailfs"
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
	asJSON := fs.Bool("json", false, "print the list as JSON")
	if err := ParseFlags(fs, args, "jail-mcp prune [--project DIR] [--older-than DUR] [--remove] [--json]", stdout); err != nil {
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
	entries, err := jailfs.Prune(cfg.Root, age, *remove, time.Now())
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
	fmt.Fprintln(tw, "SESSION\tLAST USED\tSIZE\tSTATE")
	var old, removed int
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
		case e.Old && !*remove:
			state = "old: --remove removes it"
			old++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s in %d files\t%s\n", e.Name, humanize.Time(e.LastUsed), humanize.IBytes(uint64(e.Bytes)), e.Files, state)
	}
	tw.Flush()
	switch {
	case *remove:
		fmt.Fprintf(stdout, "%d removed (unused for %v, held by no server)\n", removed, age)
	case old > 0:
		fmt.Fprintf(stdout, "%d unused for %v or more; jail-mcp prune --remove removes them\n", old, age)
	}
	return nil
}
