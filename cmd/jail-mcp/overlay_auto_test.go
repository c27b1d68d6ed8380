//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// refusingBwrapPath is a PATH whose bwrap is the real one run with
// --disable-userns: its sandbox refuses every user namespace nested in it,
// as Ubuntu's AppArmor profile for bwrap (bwrap-userns-restrict) does in
// effect. Everything else is found as in the test's PATH.
func refusingBwrapPath(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bubblewrap is not installed: %v", err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nexec " + real + " --disable-userns \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// startDefaultView starts the server on project with no --overlay and no
// --backend, args added, and fails unless it shows commands the project
// view (bubblewrap, --overlay auto).
func startDefaultView(t *testing.T, project string, args ...string) *testkit.Server {
	t.Helper()
	ts := testkit.StartServer(t, project, testkit.ServerEnv(), args...)
	if st := ts.Status(); st.Backend != "bwrap" || !st.Confined || !st.Overlay || st.OverlayMode != "auto" {
		t.Fatalf("defaults: backend %s (confined %t), view on %t under --overlay %q: %s; want bwrap with the view on (%s)", st.Backend, st.Confined, st.Overlay, st.OverlayMode, st.OverlayReason, st.Reason)
	}
	return ts
}

// toolNames are the tools ts lists.
func toolNames(t *testing.T, ts *testkit.Server) []string {
	t.Helper()
	list, err := ts.Client.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestOverlayAutoFallback: with the defaults (--overlay auto), a server
// whose bubblewrap sandbox refuses nested user namespaces comes up with
// the project view off, says why and what would enable it (its log,
// jail_status, doctor), lists no jail_diff or jail_apply, and runs
// commands on the read-only project; --overlay on refuses to start there;
// jail-mcp run falls back too. On Landlock the view is off, saying why;
// where nothing refuses it, it is on.
func TestOverlayAutoFallback(t *testing.T) {
	path := refusingBwrapPath(t)
	t.Run("bwrap refusing nested user namespaces", func(t *testing.T) {
		project := testkit.NewProject(t)
		ts := testkit.StartServer(t, project, testkit.ServerEnv("PATH="+path))
		st := ts.Status()
		if st.Backend != "bwrap" || !st.Confined {
			t.Fatalf("backend %q confined %t, want bwrap confining: %s", st.Backend, st.Confined, st.Reason)
		}
		if st.Overlay || st.OverlayMode != "auto" || !strings.Contains(st.OverlayReason, "user namespace") || !strings.Contains(st.OverlayHint, "AppArmor") {
			t.Fatalf("view: on %t mode %q reason %q hint %q; want off under auto, for the user namespace, with the AppArmor fix", st.Overlay, st.OverlayMode, st.OverlayReason, st.OverlayHint)
		}
		// Logged before the server answers initialize.
		if w := testkit.Warnings(ts.Stderr.String(), "project view off"); len(w) != 1 || !strings.Contains(w[0], " "+testkit.LogAttr("overlay", "auto")) {
			t.Errorf("no warning at start that the view is off:\n%s", ts.Stderr.String())
		}
		raw, err := ts.Call(t.Context(), "jail_status", map[string]any{})
		if err != nil || !strings.Contains(testkit.ResultText(raw), "project view off: --overlay auto") {
			t.Errorf("jail_status text says nothing of the view: %v %s", err, testkit.ResultText(raw))
		}
		if names := toolNames(t, ts); slices.Contains(names, "jail_diff") || slices.Contains(names, "jail_apply") {
			t.Errorf("tools listed with the view off: %v", names)
		}
		res, out := ts.Exec(map[string]any{"command": "echo ran; echo x > written.txt"})
		if res.Stdout != "ran\n" || res.RefusedWrite != filepath.Join(project, "written.txt") {
			t.Fatalf("command: %+v %s", res, testkit.ResultText(out))
		}
		if testkit.FileExists(filepath.Join(project, "written.txt")) {
			t.Fatal("the command wrote the host project")
		}
	})
	t.Run("on fails closed", func(t *testing.T) {
		project := testkit.NewProject(t)
		cmd := exec.Command(os.Args[0], "--project", project, "--overlay", "on")
		cmd.Env = testkit.ServerEnv("PATH=" + path)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--overlay on: the sandbox refuses its session agent a user namespace") {
			t.Fatalf("the server started or gave no reason (%v): %s", err, out)
		}
	})
	t.Run("run", func(t *testing.T) {
		project := testkit.NewProject(t)
		cmd := exec.Command(os.Args[0], "run", "--project", project, "--", "sh", "-c", "echo ran; echo x > written.txt")
		cmd.Env = testkit.ServerEnv("PATH=" + path)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if stdout.String() != "ran\n" || !strings.Contains(stderr.String(), "project view off") || !strings.Contains(stderr.String(), "write refused") {
			t.Fatalf("run (%v): stdout %q stderr:\n%s", err, stdout.String(), stderr.String())
		}
		if testkit.FileExists(filepath.Join(project, "written.txt")) {
			t.Fatal("the command wrote the host project")
		}
	})
	t.Run("doctor", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "doctor", "--json")
		cmd.Env = testkit.ServerEnv("PATH=" + path)
		out, _ := cmd.Output()
		for _, want := range []string{`"overlay_mode": "auto"`, `"overlay_on": false`, `"overlay_reason": "--overlay auto: the project view cannot run here`, `"overlay_hint": "`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("doctor --json lacks %s:\n%s", want, out)
			}
		}
	})
	t.Run("landlock", func(t *testing.T) {
		ts := testkit.Backends()[1].Start(t, testkit.NewProject(t), testkit.ServerEnv())
		st := ts.Status()
		if st.Overlay || st.OverlayMode != "auto" || !strings.Contains(st.OverlayReason, "landlock") || !strings.Contains(st.OverlayHint, "bubblewrap") {
			t.Fatalf("view: on %t mode %q reason %q hint %q; want off under auto, for landlock", st.Overlay, st.OverlayMode, st.OverlayReason, st.OverlayHint)
		}
	})
	t.Run("bwrap", func(t *testing.T) {
		ts := startDefaultView(t, testkit.NewProject(t))
		if names := toolNames(t, ts); !slices.Contains(names, "jail_diff") || !slices.Contains(names, "jail_apply") {
			t.Errorf("tools listed with the view on: %v", names)
		}
	})
}
