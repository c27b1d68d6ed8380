//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
)

// BenchmarkDenyRead measures the default --deny-read list (the built-in
// secret paths under the server user's HOME, hidden by each agent's read
// view and, under bubblewrap, by mounts) against --deny-read ”, on each
// backend: jailed_exec /bin/true, the calls alternating between the two
// servers, both with HOME a developer's (denyHome), each its own project
// (x-none: the ratio of their sums, each server's agent warm). first-ms
// and first-none-ms are the first call of each, made at once after
// initialize: one sample a run, which waits for the agent's start.
//
//	go test ./cmd/jail-mcp -run '^$' -bench DenyRead -benchtime 400x -count 5
func BenchmarkDenyRead(b *testing.B) {
	bin := productBinary(b)
	home := denyHome(b)
	// Its own CLI credentials are shown, as by default on a developer's
	// machine; none of the tester's.
	env := testkit.ServerEnv("HOME="+home, "CLAUDE_CONFIG_DIR=", "CODEX_HOME=")
	args := map[string]any{"argv": []string{"/bin/true"}}
	for _, tb := range testkit.Backends() {
		b.Run(tb.Name, func(b *testing.B) {
			call := func(ts *testkit.Server) time.Duration { return timedCall(b, ts, args) }
			// Each started, then called at once: the same wait for the
			// agent for both.
			start := func(flags ...string) (*testkit.Server, time.Duration) {
				ts := startBinary(b, tb, bin, testkit.NewProject(b), env, flags...)
				return ts, call(ts)
			}
			deny, firstDeny := start()
			none, firstNone := start("--deny-read", "")
			td, tn := alternate(b, func() time.Duration { return call(deny) }, func() time.Duration { return call(none) })
			b.ReportMetric(float64(tn.Microseconds())/float64(b.N)/1000, "none-ms")
			b.ReportMetric(float64(td)/float64(tn), "x-none")
			b.ReportMetric(float64(firstDeny.Microseconds())/1000, "first-ms")
			b.ReportMetric(float64(firstNone.Microseconds())/1000, "first-none-ms")
		})
	}
}

// denyHomeFiles is a developer's HOME, as far as the built-in --deny-read
// list walks it: some 80 entries at its top, the secrets the list names among
// them, and around them what such a home holds (.config's twenty-odd
// directories, .local/share, dotfiles, the CLIs' credentials). A name
// ending in / is a directory.
var denyHomeFiles = []string{
	// What the list hides, or shows of a hidden directory.
	".ssh/id_ed25519", ".ssh/id_ed25519.pub", ".ssh/known_hosts", ".ssh/config", ".ssh/authorized_keys",
	".aws/credentials", ".aws/config", ".gnupg/pubring.kbx", ".gnupg/private-keys-v1.d/",
	".kube/config", ".docker/config.json", ".docker/buildx/", ".git-credentials", ".netrc", ".npmrc",
	".cargo/credentials.toml", ".cargo/config.toml", ".cargo/bin/", ".cargo/registry/",
	".mozilla/firefox/profiles.ini", ".mozilla/firefox/abcd1234.default-release/cookies.sqlite",
	".local/share/keyrings/login.keyring", ".local/share/fish/fish_history", ".local/share/applications/",
	".local/share/fonts/", ".local/share/nvim/", ".local/share/Trash/", ".local/share/recently-used.xbel",
	".local/state/", ".local/bin/",
	".bash_history", ".zsh_history", ".python_history", ".node_repl_history", ".psql_history", ".lesshst", ".viminfo",
	".terraform.d/credentials.tfrc.json", ".terraform.d/plugins/", ".vault-token", ".pypirc",
	".julia/logs/repl_history.jl", ".julia/packages/", "snap/firefox/common/.mozilla/firefox/profiles.ini",
	// .config: 22 entries, the list's among them.
	".config/gh/hosts.yml", ".config/gh/config.yml", ".config/gcloud/credentials.db",
	".config/gcloud/configurations/config_default", ".config/google-chrome/Default/Cookies",
	".config/op/config", ".config/git/ignore", ".config/nvim/init.lua", ".config/fish/config.fish",
	".config/htop/htoprc", ".config/Code/User/settings.json", ".config/pulse/", ".config/systemd/user/",
	".config/dconf/user", ".config/gtk-3.0/bookmarks", ".config/ibus/", ".config/autostart/",
	".config/fontconfig/", ".config/starship.toml", ".config/alacritty/alacritty.toml", ".config/tmux/tmux.conf",
	".config/lazygit/config.yml", ".config/go/env", ".config/pip/pip.conf",
	// The rest of the top.
	".bashrc", ".profile", ".bash_logout", ".gitconfig", ".vimrc", ".tmux.conf", ".inputrc", ".wget-hsts",
	".sudo_as_admin_successful", ".selected_editor", ".Xauthority", ".xsession-errors", ".dmrc", ".face",
	".cache/go-build/", ".cache/pip/", ".cache/mozilla/", ".npm/_cacache/", ".rustup/toolchains/", ".pki/nssdb/",
	".vscode/extensions/", ".java/", ".gradle/caches/", ".m2/repository/", ".ipython/profile_default/",
	".jupyter/", ".android/", ".gem/", ".pyenv/versions/", ".nvm/versions/", ".deno/", ".bun/", ".yarn/",
	".dotnet/", ".mix/", ".stack/", ".opam/", ".sbt/", ".ivy2/", ".conda/", ".ollama/",
	"go/pkg/", "go/bin/", "src/", "projects/", "work/", "Documents/", "Downloads/", "Desktop/",
	"Pictures/", "Music/", "Videos/", "Templates/", "Public/", "notes.md", "todo.txt",
}

// denyHome makes a developer's HOME (denyHomeFiles, with the assistant
// CLIs' credentials) in plain view of every backend's jail: under the
// tester's cache directory, not in /tmp, which every jail shadows and so
// masks nothing in.
func denyHome(b *testing.B) string {
	b.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		b.Fatalf("no cache directory for the benchmark's HOME: %v", err)
	}
	// A parent of its own, which nothing else adds to while it runs: the
	// read view lists it, and is made again when it changes.
	base = filepath.Join(base, "jail-mcp-bench-home")
	if err := os.MkdirAll(base, 0o755); err != nil {
		b.Fatal(err)
	}
	home, err := os.MkdirTemp(base, "home-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(home) })
	if home, err = filepath.EvalSymlinks(home); err != nil {
		b.Fatal(err)
	}
	for _, d := range jail.ShadowDirs {
		if rd, err := filepath.EvalSymlinks(d); err == nil && testkit.Within(home, rd) {
			b.Fatalf("the benchmark's HOME would be %s, under %s, which every jail hides: set XDG_CACHE_HOME (or HOME) to a directory outside %s", home, d, strings.Join(jail.ShadowDirs, ", "))
		}
	}
	var files []fakeFile
	for _, rel := range denyHomeFiles {
		files = append(files, fakeFile{rel: rel, mode: 0o600, content: rel + "\n"})
	}
	for _, c := range realCLIs {
		files = append(files, c.files...)
	}
	for _, f := range files {
		p := filepath.Join(home, f.rel)
		if strings.HasSuffix(f.rel, "/") {
			if err := os.MkdirAll(p, 0o700); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			b.Fatal(err)
		}
	}
	return home
}
