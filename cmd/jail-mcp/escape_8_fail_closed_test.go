//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// Promise 8: fail closed, with bubblewrap missing or broken. Backend
// selection is what these vectors test: each starts its server with the
// vector's PATH, not the arm's. The bwrap arm asks for bubblewrap by name
// (--backend bwrap): every call is refused, and the status says so. The
// landlock arm lets auto choose, as a host without a working bubblewrap
// does: on this kernel it must choose Landlock, confined, and the same
// calls run but cannot write outside the jail.
func (fx *escapeFixture) failClosed(t *testing.T) {
	fake := testkit.HostDir(t)
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	backend := map[string]string{"bwrap": "bwrap", "landlock": "auto"}[fx.backend.Name]
	for _, v := range []struct{ name, path string }{
		{"bwrap-missing", "/nonexistent"},
		{"bwrap-broken", fake + ":/usr/bin:/bin"},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			project := testkit.NewProject(t)
			ts := testkit.StartServer(t, project, fx.env("PATH="+v.path), "--session", "closed", "--backend", backend)
			ran := filepath.Join(project, "ran-"+fx.marker)
			touch := "/usr/bin/touch " + ran
			for _, args := range []map[string]any{
				{"command": touch},
				{"argv": []string{"/usr/bin/touch", ran}},
				{"command": touch, "stdin": "x"},
				{"command": touch, "network": false},
				{"command": touch, "cwd": "."},
				{"command": touch, "auth": []string{}},
				{"command": touch, "timeout_ms": 1000},
			} {
				out, res := ts.Exec(args)
				if fx.landlock() {
					if res.StructuredContent == nil || !out.Confined || out.Backend != "landlock" || out.ExitCode == 0 {
						fx.escape(t, "auto without a working bubblewrap: %v -> %+v %q", args, out, testkit.ResultText(res))
					}
					if testkit.FileExists(ran) {
						fx.escape(t, "wrote outside the jail: %s exists", ran)
						os.Remove(ran)
					}
					continue
				}
				if !res.IsError || res.StructuredContent != nil {
					fx.escape(t, "ran without a jail: %v -> %q", args, testkit.ResultText(res))
				}
				if testkit.FileExists(ran) {
					t.Fatalf("the command ran: %s exists", ran)
				}
			}
			st := ts.Status()
			if fx.landlock() {
				if st.Backend != "landlock" || !st.Available || !st.Confined {
					t.Errorf("auto without a working bubblewrap: status %+v", st)
				}
			} else if st.Available || st.Confined {
				t.Errorf("status: %+v", st)
			}
		})
	}
}
