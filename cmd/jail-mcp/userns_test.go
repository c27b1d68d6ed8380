//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// closedUserns runs argv in a user namespace of its own (the caller's uid
// and gid mapped to themselves) whose max_user_namespaces is 0, with no
// capabilities left: as in the many container runtimes that close user
// namespaces, bubblewrap cannot make its sandbox there.
func closedUserns(argv ...string) *exec.Cmd {
	script := `echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"`
	args := append([]string{
		fmt.Sprintf("--map-user=%d", os.Getuid()), fmt.Sprintf("--map-group=%d", os.Getgid()), "--keep-caps",
		"sh", "-c", script, "sh",
	}, argv...)
	return exec.Command("unshare", args...)
}

// TestEscapeClosedUserNamespaces: where user namespaces are closed, doctor
// picks landlock and says why bwrap cannot run, and the landlock half of
// the escape suite holds there: this test binary runs it again inside such
// a namespace.
func TestEscapeClosedUserNamespaces(t *testing.T) {
	if os.Getenv("JAIL_MCP_TEST_CLOSED_USERNS") != "" {
		t.Fatal("already inside the closed user namespace")
	}
	probe, err := closedUserns("sh", "-c", "cat /proc/sys/user/max_user_namespaces; unshare -U true 2>&1; echo rc=$?").CombinedOutput()
	if !strings.HasPrefix(string(probe), "0\n") || !strings.Contains(string(probe), "rc=1") {
		t.Fatalf("no closed user namespace here (util-linux's unshare and setpriv): %v\n%s", err, probe)
	}

	cmd := closedUserns(os.Args[0], "doctor", "--json")
	cmd.Env = append(testkit.ServerEnv(), "JAIL_MCP_TEST_CLOSED_USERNS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	var doc struct {
		Selected string `json:"selected"`
		Backends []struct {
			Name      string `json:"backend"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
		} `json:"backends"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	if doc.Selected != "landlock" {
		t.Errorf("doctor selects %q with user namespaces closed, want landlock:\n%s", doc.Selected, out)
	}
	for _, b := range doc.Backends {
		if b.Name == "bwrap" && (b.Available || !strings.Contains(b.Reason, "namespace")) {
			t.Errorf("bwrap: available %v, reason %q: want unavailable for want of user namespaces", b.Available, b.Reason)
		}
	}

	// One vector's fixture is a daemon in a network namespace of its own,
	// which nothing can make where user namespaces are closed: it runs in
	// the suite outside.
	const needsNetns = "^TestEscape$/^landlock$/^2$/^unix-socket-other-netns$"
	t.Logf("not run in the closed namespace (its fixture needs a network namespace; the suite outside runs it): %s", needsNetns)
	run := closedUserns(os.Args[0], "-test.run", "^TestEscape$/^landlock$", "-test.skip", needsNetns, "-test.v", "-test.count=1")
	run.Env = append(os.Environ(), "JAIL_MCP_TEST_CLOSED_USERNS=1")
	out, err = run.CombinedOutput()
	passed := len(regexp.MustCompile(`(?m)^\s*--- PASS: TestEscape/landlock/\S+/\S+`).FindAll(out, -1))
	if err != nil || strings.Contains(string(out), "--- SKIP") || passed < 100 {
		t.Fatalf("the landlock escape suite in a closed user namespace: %v, %d vectors passed:\n%s", err, passed, out)
	}
	t.Logf("%d landlock escape vectors held with user namespaces closed", passed)
}
