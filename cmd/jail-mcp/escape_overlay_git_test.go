//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestOverlayApplyGitEscape: a command of the view writes what git on
// the host would read or run: a file the project's .git/config includes,
// hooks in the directory a relative core.hooksPath of the server's
// ~/.gitconfig names (at the top and in a nested directory), a
// directory shaped as a repository whose config names a core.fsmonitor.
// Every jail_apply of them is refused and writes nothing, and git status
// on the host afterwards runs nothing.
func TestOverlayApplyGitEscape(t *testing.T) {
	project := testkit.NewProject(t)
	home := testkit.HostDir(t)
	marker := filepath.Join(testkit.HostDir(t), "ran")
	writeFiles(t, home, map[string]string{".gitconfig": "[user]\n\tname = host-user\n\temail = h@h\n[core]\n\thooksPath = .githooks\n"})
	writeFiles(t, project, map[string]string{"keep.txt": "keep\n"})
	gitEnv := []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	git := func(dir string, args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = gitEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %q: %v\n%s", args, err, out)
		}
		return nil
	}
	for _, args := range [][]string{{"init", "-q"}, {"config", "include.path", "../team.gitconfig"}, {"add", "keep.txt"}, {"commit", "-qm", "keep"}} {
		if err := git(project, args...); err != nil {
			t.Fatal(err)
		}
	}
	ts := testkit.Backends()[0].Start(t, project, testkit.ServerEnv("HOME="+home), "--overlay", "on", "--session", "attacker")
	evil := fmt.Sprintf("[core]\n\tfsmonitor = \"touch %s\"\n", marker)
	plant := fmt.Sprintf(`set -e
printf '%%s' %q > team.gitconfig
mkdir -p .githooks sub/.githooks && printf '#!/bin/sh\ntouch %s\n' > .githooks/pre-commit && cp .githooks/pre-commit sub/.githooks/post-checkout
chmod +x .githooks/pre-commit sub/.githooks/post-checkout
mkdir -p bare/objects bare/refs && echo 'ref: refs/heads/main' > bare/HEAD && printf '%%s' %q > bare/config
echo plain > plain.txt`, evil, marker, evil)
	if res, raw := ts.Exec(map[string]any{"command": plant}); res.ExitCode != 0 {
		t.Fatalf("plant: %s", testkit.ResultText(raw))
	}
	before := projectTree(t, project)
	for _, paths := range [][]string{
		{"team.gitconfig"}, {".githooks"}, {".githooks/pre-commit"}, {"sub"}, {"sub/.githooks/post-checkout"},
		{"bare"}, {"bare/HEAD", "bare/objects", "bare/refs"}, {"."}, {"plain.txt", "team.gitconfig"},
	} {
		refusesApply(t, ts, map[string]any{"paths": paths}, "")
		sameTree(t, project, before)
	}
	// What git would run stays out: git status (core.fsmonitor) and a
	// commit (hooks) on the host run nothing.
	if err := git(project, "status"); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, project, map[string]string{"keep.txt": "changed\n"})
	if err := git(project, "commit", "-qam", "host"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(marker); err == nil {
		t.Fatal("git on the host ran what the command wrote")
	}
	// The plain file alone is applied.
	if res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"plain.txt"}}); err != nil || res.IsError {
		t.Fatalf("jail_apply plain.txt: %v %s", err, testkit.ResultText(res))
	}
}

// TestOverlayApplySparse: a command's sparse file (224 KiB of data in a
// file 96 MiB long) reaches the host with its holes.
func TestOverlayApplySparse(t *testing.T) {
	project := testkit.NewProject(t)
	ts := testkit.Backends()[0].Start(t, project, testkit.ServerEnv(), "--overlay", "on")
	script := `set -e
truncate -s 96M sparse.img
for i in $(seq 0 55); do printf 'data%.0s' $(seq 1024) | dd of=sparse.img bs=4096 seek=$((i * 439)) conv=notrunc status=none; done
du -k sparse.img`
	res, raw := ts.Exec(map[string]any{"command": script})
	if res.ExitCode != 0 {
		t.Fatalf("making the file: %s", testkit.ResultText(raw))
	}
	if r, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"sparse.img"}}); err != nil || r.IsError {
		t.Fatalf("jail_apply: %v %s", err, testkit.ResultText(r))
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(project, "sparse.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 96<<20 || st.Blocks*512 > 4<<20 {
		t.Fatalf("the host's file: %d bytes long, %d on disk (the jail: %s)", st.Size, st.Blocks*512, strings.TrimSpace(res.Stdout))
	}
}

// TestOverlayApplyWritablePlant (review of issue 44): a command plants,
// in a --writable directory (written on the host directly), a nested
// repository whose configuration does not read (bad syntax, then no
// permission). The session's applies of plain files go on: the look for
// nested repositories does not enter --writable directories, whose
// repositories are the commands' own, and no plant there refuses every
// apply.
func TestOverlayApplyWritablePlant(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"keep.txt": "keep\n"})
	ts := testkit.Backends()[0].Start(t, project, testkit.ServerEnv(), "--overlay", "on", "--writable", "out", "--session", "planter")
	for i, plant := range []string{
		`mkdir -p out/x/.git && printf '[core\n' > out/x/.git/config`,
		`printf '[core]\n' > out/x/.git/config && chmod 000 out/x/.git/config out/x/.git`,
	} {
		name := fmt.Sprintf("plain-%d.txt", i)
		if res, raw := ts.Exec(map[string]any{"command": plant + " && echo p > " + name}); res.ExitCode != 0 {
			t.Fatalf("plant: %s", testkit.ResultText(raw))
		}
		res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{name}})
		if err != nil || res.IsError {
			t.Fatalf("jail_apply %s beside the plant %q: %v %s", name, plant, err, testkit.ResultText(res))
		}
		if b, _ := os.ReadFile(filepath.Join(project, name)); string(b) != "p\n" {
			t.Errorf("%s on the host: %q", name, b)
		}
	}
	ts.Exec(map[string]any{"command": "chmod -R u+rwx out"})
}
