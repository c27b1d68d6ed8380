package layer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitEnv gives git's configuration lookup a home of the test's own, no
// system file and no configuration from the environment, and returns
// the home.
func gitEnv(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	// Unset, as git tells an empty GIT_CONFIG_GLOBAL from none.
	for _, k := range []string{"XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_DIR", "GIT_WORK_TREE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	return home
}

// TestApplyGitConfig: what git reads as configuration, or runs as hooks,
// wherever its configuration names it (an included file, the global
// or system file, a linked worktree's repository, the environment), is
// protected, and so is a directory git would take for a repository.
func TestApplyGitConfig(t *testing.T) {
	runGitCases(t, []gitCase{{
		name:    "an included file",
		host:    []node{file(".git/config", "[include]\n\tpath = ../shared.gitconfig\n")},
		upper:   []node{file("shared.gitconfig", "[core]\n\tfsmonitor = touch /tmp/pwned\n"), file("ok", "ok")},
		paths:   []string{"."},
		refused: []refusal{{"shared.gitconfig", "protected: shared.gitconfig"}},
	}, {
		name: "a conditional include, and one it includes",
		host: []node{
			file(".git/config", "[includeIf \"onbranch:main\"]\n\tpath = ../ci/git.inc\n"),
			file("ci/git.inc", "[include]\n\tpath = deeper/more.inc ; a comment\n"),
		},
		upper:   []node{file("ci/deeper/more.inc", "x"), file("ci/other", "o")},
		paths:   []string{"ci"},
		refused: []refusal{{"ci/deeper/more.inc", "protected: ci/deeper/more.inc"}},
	}, {
		name:    "an include through a continued line",
		host:    []node{file(".git/config", "[include]\n\tpath = ../sha\\\nred.inc\n")},
		upper:   []node{file("shared.inc", "x")},
		paths:   []string{"."},
		refused: []refusal{{"shared.inc", "protected: shared.inc"}},
	}, {
		name: "a nested repository's include and hooks",
		host: []node{
			file("vendor/lib/.git/config", "[include]\n\tpath = ../lib.gitconfig\n[core]\n\thooksPath = tools/hooks\n"),
			file("vendor/lib/README", "r"),
		},
		upper:   []node{file("vendor/lib/lib.gitconfig", "[core]\n\tfsmonitor = touch /tmp/pwned\n"), exe("vendor/lib/tools/hooks/pre-commit", "x"), file("vendor/lib/ok", "ok")},
		paths:   []string{"vendor"},
		refused: []refusal{{"vendor/lib/lib.gitconfig", "protected: vendor/lib/lib.gitconfig"}, {"vendor/lib/tools/hooks", "protected: vendor/lib/tools/hooks"}, {"vendor/lib/tools/hooks/pre-commit", "protected: vendor/lib/tools/hooks"}},
	}, {
		name:    "a global hooksPath into the project",
		home:    []node{file(".gitconfig", "[core]\n\thooksPath = {project}/hooks\n")},
		upper:   []node{exe("hooks/pre-commit", "x")},
		paths:   []string{"hooks/pre-commit"},
		refused: []refusal{{"hooks/pre-commit", "protected: hooks"}},
	}, {
		name:    "a relative global hooksPath, in every repository",
		home:    []node{file(".config/git/config", "[core]\n\thooksPath = .githooks\n")},
		upper:   []node{exe(".githooks/pre-commit", "x"), exe("vendor/lib/.githooks/post-checkout", "x")},
		paths:   []string{"."},
		refused: []refusal{{".githooks", "protected: .githooks"}, {".githooks/pre-commit", "protected: .githooks"}, {"vendor/lib/.githooks", "protected: **/.githooks"}, {"vendor/lib/.githooks/post-checkout", "protected: **/.githooks"}},
	}, {
		name:    "GIT_CONFIG_GLOBAL including a project file",
		home:    []node{file("elsewhere.gitconfig", "[include]\n\tpath = ~/more.gitconfig\n"), file("more.gitconfig", "[include]\n\tpath = {project}/team.gitconfig\n")},
		env:     map[string]string{"GIT_CONFIG_GLOBAL": "~/elsewhere.gitconfig"},
		upper:   []node{file("team.gitconfig", "x")},
		paths:   []string{"."},
		refused: []refusal{{"team.gitconfig", "protected: team.gitconfig"}},
	}, {
		name:    "the system file",
		home:    []node{file("system.gitconfig", "[core]\n\thooksPath = {project}/sys-hooks\n")},
		env:     map[string]string{"GIT_CONFIG_SYSTEM": "~/system.gitconfig", "GIT_CONFIG_NOSYSTEM": ""},
		upper:   []node{exe("sys-hooks/pre-push", "x")},
		paths:   []string{"."},
		refused: []refusal{{"sys-hooks", "protected: sys-hooks"}, {"sys-hooks/pre-push", "protected: sys-hooks"}},
	}, {
		name:    "configuration from the environment",
		env:     map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "env-hooks"},
		upper:   []node{exe("env-hooks/pre-commit", "x")},
		paths:   []string{"."},
		refused: []refusal{{"env-hooks", "protected: env-hooks"}, {"env-hooks/pre-commit", "protected: env-hooks"}},
	}, {
		name:    "a .git file naming a repository in the project",
		host:    []node{file(".git", "gitdir: store/repo\n"), file("store/repo/config", "[core]\n\thooksPath = h\n")},
		upper:   []node{file("store/repo/hooks/pre-commit", "x"), file("h/pre-commit", "x")},
		paths:   []string{"."},
		refused: []refusal{{"h", "protected: h"}, {"h/pre-commit", "protected: h"}, {"store/repo/hooks", "protected: store/repo"}, {"store/repo/hooks/pre-commit", "protected: store/repo"}},
	}, {
		name:    "core.worktree moves the hooks' top",
		host:    []node{file(".git/config", "[core]\n\tworktree = ../tree\n\thooksPath = hooks\n")},
		upper:   []node{exe("tree/hooks/pre-commit", "x")},
		paths:   []string{"."},
		refused: []refusal{{"tree/hooks", "protected: tree/hooks"}, {"tree/hooks/pre-commit", "protected: tree/hooks"}},
	}, {
		name:    "hook runners and the dev container",
		upper:   []node{file("lefthook.yml", "x"), file(".lefthook/pre-commit/a.sh", "x"), file("sub/.overcommit.yml", "x"), file("sub/.lefthook-local.jsonc", "x"), file(".devcontainer/devcontainer.json", "{}"), file(".devcontainer.json", "{}"), file(".github/workflows/ci.yml", "on: push\n")},
		paths:   []string{"."},
		refused: []refusal{{".devcontainer", "protected: .devcontainer"}, {".devcontainer/devcontainer.json", "protected: .devcontainer"}, {".devcontainer.json", "protected: .devcontainer.json"}, {".lefthook", "protected: .lefthook"}, {".lefthook/pre-commit", "protected: .lefthook"}, {".lefthook/pre-commit/a.sh", "protected: .lefthook"}, {"lefthook.yml", "protected: lefthook's configuration"}, {"sub/.lefthook-local.jsonc", "protected: lefthook's configuration"}, {"sub/.overcommit.yml", "protected: .overcommit.yml"}},
	}, {
		name:    "a new directory git takes for a repository",
		upper:   []node{file("evil/HEAD", "ref: refs/heads/main\n"), dir("evil/objects"), dir("evil/refs"), file("evil/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n"), file("ok", "ok")},
		paths:   []string{"."},
		refused: []refusal{{"evil", "makes a git repository of evil"}, {"evil/HEAD", "makes a git repository of evil"}, {"evil/config", "makes a git repository of evil"}, {"evil/objects", "makes a git repository of evil"}, {"evil/refs", "makes a git repository of evil"}},
	}, {
		name:    "HEAD beside the host's objects and refs",
		host:    []node{dir("fix/objects"), dir("fix/refs"), file("fix/a", "a")},
		upper:   []node{file("fix/HEAD", "0123456789012345678901234567890123456789\n"), file("fix/b", "b")},
		paths:   []string{"fix/HEAD"},
		refused: []refusal{{"fix/HEAD", "makes a git repository of fix"}},
	}, {
		name:    "a commondir beside HEAD",
		upper:   []node{file("wt/HEAD", "ref: refs/heads/x\n"), file("wt/commondir", "../.git\n")},
		paths:   []string{"wt"},
		refused: []refusal{{"wt", "makes a git repository of wt"}, {"wt/HEAD", "makes a git repository of wt"}, {"wt/commondir", "makes a git repository of wt"}},
	}})
}

// gitCase is an apply refused for what git reads or runs: the host
// project, the view's layer, the server's home and environment.
type gitCase struct {
	name        string
	host, upper []node
	home        []node            // the server's home
	env         map[string]string // with "~" for the home
	paths       []string
	refused     []refusal
}

func runGitCases(t *testing.T, tests []gitCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := gitEnv(t)
			up, project := setup(t, tt.host, tt.upper)
			for i, n := range tt.home {
				tt.home[i].data = strings.ReplaceAll(n.data, "{project}", project)
			}
			build(t, home, tt.home...)
			for k, v := range tt.env {
				t.Setenv(k, strings.Replace(v, "~", home, 1))
			}
			assertRefused(t, up, project, tt.paths, tt.refused)
		})
	}
}

// TestApplyGitPrograms: a program of the project that a configuration
// git reads names (by a path, not a bare name looked up in PATH) is
// protected like a hooks directory; one named relative by the global
// configuration, at any depth.
func TestApplyGitPrograms(t *testing.T) {
	runGitCases(t, []gitCase{{
		name: "programs the configuration names",
		host: []node{file(".git/config", "[core]\n\tpager = tools/pager -R\n\teditor = vim\n\tfsmonitor = true\n"+
			"[alias]\n\tst = !./scripts/st.sh --short\n\tlg = log --graph -- lg/x\n"+
			"[filter \"crlf\"]\n\tclean = 'bin/my clean' %f\n"+
			"[credential \"https://example.com\"]\n\thelper = !tools/cred get\n[credential]\n\thelper = store\n")},
		home: []node{file(".gitconfig", "[gpg]\n\tprogram = {project}/sign/gpg\n[diff \"img\"]\n\ttextconv = ~/conv\n[pager]\n\tlog = ./tools/logpager\n")},
		upper: []node{exe("tools/pager", "x"), exe("vim", "x"), exe("scripts/st.sh", "x"), file("lg/x", "x"), exe("bin/my clean", "x"),
			exe("tools/cred", "x"), exe("store", "x"), exe("sign/gpg", "x"), exe("tools/logpager", "x"), exe("sub/tools/logpager", "x"), file("ok", "ok")},
		paths: []string{"."},
		refused: []refusal{{"bin/my clean", "protected: bin/my clean"}, {"scripts/st.sh", "protected: scripts/st.sh"}, {"sign/gpg", "protected: sign/gpg"},
			{"sub/tools/logpager", "protected: **/tools/logpager"}, {"tools/cred", "protected: tools/cred"}, {"tools/logpager", "protected: tools/logpager"}, {"tools/pager", "protected: tools/pager"}},
	}})
}

// TestApplyNestedRepos: the configuration of every repository nested in
// the project (a .git, or a bare repository's shape) is read, whatever
// paths are applied: it can name project files outside the repository.
func TestApplyNestedRepos(t *testing.T) {
	runGitCases(t, []gitCase{{
		name: "a nested repository's configuration, whatever is applied",
		host: []node{
			file("vendor/lib/.git/config", "[include]\n\tpath = ../../../shared.inc\n[core]\n\thooksPath = ../hooks\n\tsshCommand = ../../tools/ssh -v\n"),
			file("vendor/lib/README", "r"),
			file("fixtures/bare.git/HEAD", "ref: refs/heads/main\n"), dir("fixtures/bare.git/objects"), dir("fixtures/bare.git/refs"),
			file("fixtures/bare.git/config", "[include]\n\tpath = ../../bare.inc\n"),
		},
		upper:   []node{file("shared.inc", "x"), exe("vendor/hooks/pre-commit", "x"), exe("tools/ssh", "x"), file("bare.inc", "x"), file("ok", "ok")},
		paths:   []string{"shared.inc", "vendor/hooks", "tools", "bare.inc", "ok"},
		refused: []refusal{{"bare.inc", "protected: bare.inc"}, {"shared.inc", "protected: shared.inc"}, {"tools/ssh", "protected: tools/ssh"}, {"vendor/hooks", "protected: vendor/hooks"}, {"vendor/hooks/pre-commit", "protected: vendor/hooks"}},
	}, {
		name:    "a submodule's checkout, its repository in .git/modules",
		host:    []node{file(".git/modules/lib/config", "[core]\n\thooksPath = ../tools/hooks\n"), file("lib/.git", "gitdir: ../.git/modules/lib\n")},
		upper:   []node{exe("tools/hooks/pre-commit", "x"), file("tools/ok", "ok")},
		paths:   []string{"tools"},
		refused: []refusal{{"tools/hooks", "protected: tools/hooks"}, {"tools/hooks/pre-commit", "protected: tools/hooks"}},
	}})
}

// TestApplyNestedUnread (review of issue 44): a nested repository whose
// configuration cannot be read (a command can make one in the layer's
// host, or its owner keeps it private) fails no apply: what it names is
// not known, so the apply's files are refused, naming it, while
// deletions and directories apply. A repository in a --writable
// directory (ApplyOptions.Skip), where commands write the host directly,
// is not looked at: it names nothing an apply could vouch for.
func TestApplyNestedUnread(t *testing.T) {
	gitEnv(t)
	host := []node{file("vendor/lib/.git/config", "[core\n"), file("gone", "g"),
		file("build/x/.git/config", "[include]\n\tpath = ../../../w.inc\n")}
	up, project := setup(t, host, []node{file("a/new", "n"), whiteout("gone"), file("w.inc", "w")})
	assertRefused(t, up, project, []string{"a"}, []refusal{{"a/new", "not checked: the configuration of the repository at vendor/lib cannot be read"}})
	res, err := Apply(up, project, []string{"gone"}, false)
	if err != nil || len(res.Refused) != 0 || len(res.Changes) != 1 {
		t.Fatalf("Apply(gone) = %+v, %v; want it applied", res, err)
	}
	if err := os.Remove(filepath.Join(project, "vendor/lib/.git/config")); err != nil {
		t.Fatal(err)
	}
	assertRefused(t, up, project, []string{"w.inc"}, []refusal{{"w.inc", "protected: w.inc"}})
	res, err = ApplyWith(up, project, []string{"w.inc"}, ApplyOptions{Skip: []string{filepath.Join(project, "build")}})
	if err != nil || len(res.Refused) != 0 || len(res.Changes) != 1 {
		t.Fatalf("Apply(w.inc) with build writable = %+v, %v; want it applied", res, err)
	}
}

// TestApplyGitConfigUnread: a configuration file git would read that
// cannot be read or parsed refuses the apply whole, saying which.
func TestApplyGitConfigUnread(t *testing.T) {
	tests := []struct {
		name string
		host []node
		home []node
		want string
	}{
		{name: "a directory for the global file", home: []node{dir(".gitconfig")}, want: ".gitconfig"},
		{name: "a FIFO for an included file", host: []node{file(".git/config", "[include]\n\tpath = ../p\n"), fifo("p")}, want: "/p: not a regular file"},
		{name: "bad syntax", host: []node{file(".git/config", "[core\n\thooksPath = h\n")}, want: ".git/config: line 1"},
		{name: "includes too deep", host: []node{file(".git/config", "[include]\n\tpath = config\n")}, want: "more than 10 includes deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := gitEnv(t)
			build(t, home, tt.home...)
			up, project := setup(t, tt.host, []node{file("ok", "ok")})
			hostBefore := treeHash(t, project)
			res, err := Apply(up, project, []string{"ok"}, false)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Apply = %+v, %v; want one line naming %q", res, err, tt.want)
			}
			if treeHash(t, project) != hostBefore {
				t.Error("the refused apply changed the project")
			}
		})
	}
}

// TestApplyLinkedWorktree: the project is a linked worktree (git
// worktree add), whose .git is a file; its repository's configuration
// (commondir/config, with an include) and config.worktree name hooks in
// the project.
func TestApplyLinkedWorktree(t *testing.T) {
	gitEnv(t)
	tmp := t.TempDir()
	main, project := filepath.Join(tmp, "main"), filepath.Join(tmp, "wt")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	build(t, main, file("a", "a"))
	git(main, "init", "-q", "-b", "main")
	git(main, "add", "a")
	git(main, "commit", "-qm", "a")
	git(main, "worktree", "add", "-q", "-b", "wt", project)
	git(main, "config", "core.hooksPath", "wt-hooks")
	git(main, "config", "include.path", filepath.Join(project, "team.inc"))
	git(main, "config", "extensions.worktreeConfig", "true")
	git(project, "config", "--worktree", "core.hooksPath", "tree-hooks")
	up := filepath.Join(tmp, "jail", ".overlay", "upper")
	build(t, up, exe("wt-hooks/pre-commit", "x"), exe("tree-hooks/pre-commit", "x"), file("team.inc", "x"))
	assertRefused(t, up, project, []string{"."}, []refusal{
		{"team.inc", "protected: team.inc"},
		{"tree-hooks", "protected: tree-hooks"}, {"tree-hooks/pre-commit", "protected: tree-hooks"},
		{"wt-hooks", "protected: wt-hooks"}, {"wt-hooks/pre-commit", "protected: wt-hooks"},
	})
	// git itself agrees on where the hooks are.
	out, err := exec.Command("git", "-C", project, "rev-parse", "--git-path", "hooks").Output()
	if err != nil || strings.TrimSpace(string(out)) != "tree-hooks" {
		t.Errorf("git rev-parse --git-path hooks = %q, %v", out, err)
	}
}

// TestGitProjectBelowRepository: the project is a directory of a
// repository whose top lies above it; the repository's hooksPath names a
// directory in the project.
func TestGitProjectBelowRepository(t *testing.T) {
	gitEnv(t)
	tmp := t.TempDir()
	build(t, tmp, file("repo/.git/config", "[core]\n\thooksPath = proj/hooks\n"), dir("repo/proj"))
	project := filepath.Join(tmp, "repo", "proj")
	up := filepath.Join(tmp, "jail", ".overlay", "upper")
	build(t, up, exe("hooks/pre-commit", "x"))
	assertRefused(t, up, project, []string{"."}, []refusal{{"hooks", "protected: hooks"}, {"hooks/pre-commit", "protected: hooks"}})
	if _, err := os.Stat(filepath.Join(project, "hooks")); err == nil {
		t.Fatal("hooks reached the project")
	}
}

// TestApplyNestedBound: when the project has more directories than the
// look for nested repositories visits, a file the apply writes could be
// one their configuration names, and is refused; a deletion and a
// directory apply.
func TestApplyNestedBound(t *testing.T) {
	gitEnv(t)
	defer func(n int) { maxNestedDirs = n }(maxNestedDirs)
	maxNestedDirs = 3
	host := []node{file("a/x", "x"), file("b/x", "x"), file("c/x", "x"), file("gone", "g"), dir("node_modules/m"), dir(".agent-home/s")}
	up, project := setup(t, host, []node{file("a/new", "n"), whiteout("gone"), dir("newdir")})
	assertRefused(t, up, project, []string{"."}, []refusal{{"a/new", "not checked: the project has more than 3 directories"}})
	res, err := Apply(up, project, []string{"gone", "newdir"}, false)
	if err != nil || len(res.Refused) != 0 || len(res.Changes) != 2 {
		t.Fatalf("Apply(gone, newdir) = %+v, %v; want both applied", res, err)
	}
	// Within the bound (the project, a, b, c and newdir: node_modules and
	// .agent-home are not entered), the file applies.
	maxNestedDirs = 5
	res, err = Apply(up, project, []string{"a/new"}, false)
	if err != nil || len(res.Refused) != 0 || len(res.Changes) != 1 {
		t.Fatalf("Apply(a/new) = %+v, %v; want it applied", res, err)
	}
}
