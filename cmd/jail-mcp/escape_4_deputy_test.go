//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// Promise 4: the server is never a confused deputy. Session d plants
// symlinks to the victim wherever the server works in a jail, then makes
// the server work there.
func (fx *escapeFixture) noConfusedDeputy(t *testing.T) {
	jail := fx.jails["d"]
	// No credential is bound while planting, so that every credential
	// place is a plain name the command can replace.
	plant := func(t *testing.T, script string) {
		t.Helper()
		fx.attack(t, fx.d, script, map[string]any{"auth": []string{}})
	}
	// spill prints more than the inline limit, so the server keeps the
	// output in the jail; its kept output must stay in the jail.
	spill := func(t *testing.T, ts *testkit.Server, auth []string) {
		t.Helper()
		args := map[string]any{"command": `head -c 100000 /dev/zero | tr '\0' s; cat "$HOME/.gitconfig" >/dev/null; echo done`}
		if auth != nil {
			args["auth"] = auth
		}
		res, raw := ts.Exec(args)
		if raw.StructuredContent == nil {
			t.Logf("call refused: %q", testkit.ResultText(raw))
			return
		}
		if res.OutputPath != "" {
			real, err := filepath.EvalSymlinks(res.OutputPath)
			if !testkit.Within(res.OutputPath, jail) || (err == nil && !testkit.Within(real, jail)) {
				fx.escape(t, "output kept outside the jail: %s (%s)", res.OutputPath, real)
			}
		}
	}
	const moveJailMCP = `mv -T "$HOME/.jail-mcp" "$HOME/.old-jail-mcp-$$" 2>/dev/null || rm -rf "$HOME/.jail-mcp" 2>/dev/null
`
	const plantState = moveJailMCP + `mkdir -p "$HOME/.jail-mcp/state/claude" "$HOME/.jail-mcp/state/codex" "$HOME/.jail-mcp/state/gh/.config" "$HOME/.jail-mcp/state/git"
ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"
ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json"
ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json.new"
ln -sfn "$VICTIM" "$HOME/.jail-mcp/state/codex/.codex"
ln -sfn "$VICTIM" "$HOME/.jail-mcp/state/gh/.config/gh"
ln -sfn "$VFILE" "$HOME/.jail-mcp/state/git/.gitconfig"
`
	const plantPlaces = `for p in .tmp .cache .config .local .runtime .codex .claude .gemini .kimi .gitconfig .claude.json .git-credentials; do
	mv -T "$HOME/$p" "$HOME/.old-$p-$$" 2>/dev/null || rm -rf "$HOME/$p" 2>/dev/null
	case $p in .gitconfig|.claude.json|.git-credentials) ln -sfn "$VFILE" "$HOME/$p" ;; *) ln -sfn "$VICTIM" "$HOME/$p" ;; esac
done
`

	fx.vector(t, "output-spill", func(t *testing.T) {
		for _, p := range []string{
			moveJailMCP + `ln -sfn "$VICTIM" "$HOME/.jail-mcp"`,
			moveJailMCP + `mkdir -p "$HOME/.jail-mcp"; ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"`,
			moveJailMCP + `mkdir -p "$HOME/.jail-mcp/output"; for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21; do ln -sfn "$VICTIM" "$HOME/.jail-mcp/output/0000000$i"; done`,
		} {
			// The output of the planting call itself is spilled after the plant.
			plant(t, p+`
head -c 100000 /dev/zero | tr '\0' s; echo`)
			spill(t, fx.d, nil)
			spill(t, fx.d, []string{})
		}
	})
	fx.vector(t, "skeleton-and-credential-places", func(t *testing.T) {
		plant(t, plantPlaces)
		spill(t, fx.d, nil)
		fx.attack(t, fx.d, `ls -la "$HOME" >/dev/null; echo private >> "$HOME/.claude.json"; echo private >> "$HOME/.codex/config.toml"`, nil)
	})
	fx.vector(t, "state-copies", func(t *testing.T) {
		plant(t, plantState)
		spill(t, fx.d, nil)
		fx.attack(t, fx.d, `echo private >> "$HOME/.claude.json"; echo private >> "$HOME/.codex/config.toml"`, nil)
	})
	fx.vector(t, "restart", func(t *testing.T) {
		// Left for the next server of the session, which copies the
		// credential state when it opens the session.
		plant(t, plantState+plantPlaces)
		again := fx.start(t, fx.project, fx.env(), "--session", "d", "--auth", "all")
		spill(t, again, nil)
	})
	fx.vector(t, "usage", func(t *testing.T) {
		plant(t, plantPlaces+`ln -sfn "$VICTIM/big" "$HOME/big-link"; ln -sfn / "$HOME/root-link"; ln -sfn "$VICTIM" "$HOME/victim-link"`)
		// The disk watchdog counts the jail once a second too.
		fx.d.Exec(map[string]any{"command": "sleep 1.2"})
		st := fx.d.Status()
		if st.Usage.Bytes >= 2<<20 {
			fx.escape(t, "usage counts what symlinks point at: %+v", st.Usage)
		}
	})
	fx.vector(t, "reset", func(t *testing.T) {
		plant(t, plantState+plantPlaces+`
mkdir -p "$HOME/locked/inner" "$HOME/ro/inner" "$HOME/deep/a/b"
echo x > "$HOME/locked/inner/f"
ln -sfn "$VICTIM" "$HOME/deep/a/b/c"; ln -sfn "$VICTIM" "$HOME/locked/inner/v"; ln -sfn "$VICTIM/sub" "$HOME/ro/inner/v"
chmod 000 "$HOME/locked"; chmod 500 "$HOME/ro"`)
		res, err := fx.d.Call(t.Context(), "jail_reset", nil)
		if err != nil || res.IsError {
			t.Errorf("reset: %v %q", err, testkit.ResultText(res))
		}
		if res, _ := fx.d.Exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("after reset: %+v", res)
		}
	})
	fx.vector(t, "race", func(t *testing.T) {
		stop := filepath.Join(testkit.HostDir(t), "stop")
		token := "race-" + fx.marker
		done := make(chan tools.ExecResult, 1)
		var raceErr error
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, _, err := callExec(ctx, fx.d, map[string]any{
				"auth": []string{},
				"env":  merge(fx.vars(fx.d), map[string]any{"STOP": stop}),
				"command": "# " + token + `
i=0
while [ ! -e "$STOP" ] && [ $i -lt 3000 ]; do
	i=$((i+1))
	mv -T "$HOME/.jail-mcp" "$HOME/.old-jm-$i" 2>/dev/null
	case $((i % 3)) in
	0) ln -sfn "$VICTIM" "$HOME/.jail-mcp" ;;
	1) mkdir -p "$HOME/.jail-mcp/state/claude" "$HOME/.jail-mcp/state/codex"
	   ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"
	   ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json"
	   ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json.new"
	   ln -sfn "$VICTIM" "$HOME/.jail-mcp/state/codex/.codex" ;;
	2) mkdir -p "$HOME/.jail-mcp"; ln -sfn "$VICTIM" "$HOME/.jail-mcp/state" ;;
	esac
	for p in .config .codex .tmp .cache; do
		mv -T "$HOME/$p" "$HOME/.old$p-$i" 2>/dev/null; ln -sfn "$VICTIM" "$HOME/$p" 2>/dev/null
	done
	mv -T "$HOME/.claude.json" "$HOME/.old-cj-$i" 2>/dev/null; ln -sfn "$VFILE" "$HOME/.claude.json" 2>/dev/null
done
echo "iterations $i"
`,
			})
			raceErr = err
			done <- res
		}()
		if !testkit.WaitFor(10*time.Second, func() bool { return len(testkit.ProcessesWith(token)) > 0 }) {
			t.Fatal("the racing command did not start")
		}
		start := time.Now()
		var wg sync.WaitGroup
		var calls, broken atomic.Int64
		for w := range 4 {
			wg.Go(func() {
				for i := range 5 {
					cmd := "cat ~/.gitconfig ~/.claude.json >/dev/null 2>&1; echo private >> ~/.codex/config.toml 2>/dev/null; echo ok"
					if (w+i)%2 == 0 {
						cmd = "head -c 70000 /dev/zero | tr '\\0' r"
					}
					// Bounded, so that a server that hangs fails the
					// vector instead of the whole suite's timeout.
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					_, _, err := callExec(ctx, fx.d, map[string]any{"command": cmd})
					if err != nil {
						broken.Add(1)
					}
					if _, err := fx.d.Call(ctx, "jail_status", nil); err != nil {
						broken.Add(1)
					}
					cancel()
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		if d := 2*time.Second - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		os.WriteFile(stop, nil, 0o644)
		res := <-done
		t.Logf("%d calls raced the command; %s", calls.Load(), strings.TrimSpace(res.Stdout))
		if raceErr != nil {
			t.Errorf("the racing command's call: %v", raceErr)
		}
		if broken.Load() > 0 {
			t.Errorf("%d calls failed at the transport or did not return within a minute: the server broke\nserver stderr:\n%s", broken.Load(), testkit.Tail(fx.d.Stderr.String()))
		}
		if res, _ := fx.d.Exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("after the race: %+v", res)
		}
		if res, err := fx.d.Call(t.Context(), "jail_reset", nil); err != nil || res.IsError {
			t.Errorf("reset after the race: %v", err)
		}
	})

	// A session directory or jail base that is a symlink (planted by a
	// command of an earlier life of the project, say) is refused, never
	// followed, by the server and by jail-mcp run.
	for _, v := range []struct{ name, link, session string }{
		{"session-dir-symlink", ".agent-home/evil", "evil"},
		{"jail-base-symlink", ".agent-home", "evil"},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			project := testkit.NewProject(t)
			link := filepath.Join(project, v.link)
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(fx.victim, link); err != nil {
				t.Fatal(err)
			}
			// On the suite's backend: its flags before the command of run.
			flags := append([]string{"--project", project, "--session", v.session}, fx.backend.Args...)
			for _, args := range [][]string{
				append([]string{"serve"}, flags...),
				append(append([]string{"run"}, flags...), "--", "/bin/sh", "-c", `echo x > "$HOME/pwned-`+fx.marker+`"`),
			} {
				cmd := exec.Command(os.Args[0], args...)
				cmd.Env = append(fx.env(), fx.backend.Env...)
				cmd.Dir = project
				out, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(out), "symlink") && !strings.Contains(string(out), "not "+filepath.Join(project, ".agent-home")) {
					fx.escape(t, "%s with a symlinked %s: %v\n%s", args[0], v.link, err, out)
				}
			}
		})
	}
}
