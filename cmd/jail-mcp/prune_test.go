//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// TestPrune: prune lists every jail with its last use and removes, with
// --remove only, the old ones no running server holds; it never follows a
// symlink out of the jail base, and empties jails a command locked up.
func TestPrune(t *testing.T) {
	project := testkit.NewProject(t)
	held := testkit.StartServer(t, project, testkit.ServerEnv(), "--session", "held")
	if res, _ := held.Exec(map[string]any{"command": "echo x > \"$HOME/f\""}); res.ExitCode != 0 {
		t.Fatalf("exec: %+v", res)
	}
	base := filepath.Join(project, ".agent-home")
	victim := testkit.HostDir(t)
	os.WriteFile(filepath.Join(victim, "precious"), []byte("keep"), 0o644)
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, name := range []string{"old-named", "0f8fad5b-d9cb-469f-a165-70867728950e", "young"} {
		dir := filepath.Join(base, name)
		os.MkdirAll(filepath.Join(dir, "locked/deep"), 0o700)
		os.WriteFile(filepath.Join(dir, "locked/deep/file"), []byte("data"), 0o600)
		os.Chmod(filepath.Join(dir, "locked"), 0)
		// What prune keeps must still go at the end of the test, as a
		// normal user too.
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o700) })
		if name != "young" {
			os.Chtimes(dir, old, old)
		}
	}
	if err := os.Symlink(victim, filepath.Join(base, "evil")); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(base, "held"), old, old) // old, but held by a server

	list := func(args ...string) map[string]jailfs.PruneEntry {
		t.Helper()
		res := runInProcess(t, append([]string{"prune", "--project", project, "--json"}, args...), cfgEnv())
		if res.code != 0 {
			t.Fatalf("prune %v: exit %d, stderr %s", args, res.code, res.stderr)
		}
		var entries []jailfs.PruneEntry
		if err := json.Unmarshal([]byte(res.stdout), &entries); err != nil {
			t.Fatalf("prune --json: %v\n%s", err, res.stdout)
		}
		m := map[string]jailfs.PruneEntry{}
		for _, e := range entries {
			m[e.Name] = e
		}
		return m
	}
	got := list()
	if len(got) != 4 || got["evil"].Name != "" {
		t.Fatalf("listed %+v, want the four jails and no symlink", got)
	}
	if e := got["held"]; !e.InUse || !e.Named || e.Removed {
		t.Errorf("held: %+v", e)
	}
	if e := got["0f8fad5b-d9cb-469f-a165-70867728950e"]; e.Named || !e.Old || e.Removed {
		t.Errorf("uuid: %+v", e)
	}
	if e := got["young"]; e.Old {
		t.Errorf("young: %+v", e)
	}
	for _, name := range []string{"old-named", "0f8fad5b-d9cb-469f-a165-70867728950e", "young", "held"} {
		if !testkit.FileExists(filepath.Join(base, name)) {
			t.Errorf("listing removed %s", name)
		}
	}

	got = list("--remove")
	for name, want := range map[string]bool{"old-named": true, "0f8fad5b-d9cb-469f-a165-70867728950e": true, "young": false, "held": false} {
		if got[name].Removed != want || testkit.FileExists(filepath.Join(base, name)) == want {
			t.Errorf("%s: removed %v, want %v (%+v)", name, got[name].Removed, want, got[name])
		}
	}
	if b, err := os.ReadFile(filepath.Join(victim, "precious")); err != nil || string(b) != "keep" || !testkit.FileExists(filepath.Join(base, "evil")) {
		t.Errorf("the symlink's target or the link itself was touched: %v %q", err, b)
	}
	// The held session still works; its end stamps its last use.
	if res, _ := held.Exec(map[string]any{"command": "cat \"$HOME/f\""}); res.Stdout != "x\n" {
		t.Errorf("held session after prune: %+v", res)
	}
	held.Client.Close()
	held.Cmd.Wait()
	if e := list()["held"]; time.Since(e.LastUsed) > time.Minute || e.InUse {
		t.Errorf("held after its server ended: %+v", e)
	}
	res := runInProcess(t, []string{"prune", "--project", project, "--older-than", "soon"}, cfgEnv())
	if res.code != 2 || !strings.Contains(res.stderr, "--older-than") {
		t.Errorf("bad --older-than: exit %d %q", res.code, res.stderr)
	}
}
