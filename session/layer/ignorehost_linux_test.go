package layer

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestIgnoreRulesFromHost: a command that changes .gitignore or
// .git/info/exclude in the view hides nothing from the listing, a file
// the host's git index tracks is listed even under an ignored path, and
// a changed .gitignore is itself listed (issue 44, point 7).
func TestIgnoreRulesFromHost(t *testing.T) {
	tmp := t.TempDir()
	project := filepath.Join(tmp, "project")
	up := filepath.Join(tmp, "jail", ".overlay", "upper")
	build(t, project,
		file(".gitignore", "build/\n"),
		file("src/a.go", "package a\n"), file("other.txt", "o\n"),
		file("build/keep.txt", "tracked\n"), file("build/out.o", "obj\n"),
	)
	git := exec.Command("sh", "-euc", `git init -q . && git add -f .gitignore src/a.go other.txt build/keep.txt`)
	git.Dir = project
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	inView(t, project, up, `
		printf 'build/\nsrc/\n.gitignore\n' > .gitignore
		echo other.txt >> .git/info/exclude
		echo changed >> src/a.go
		echo changed >> other.txt
		echo changed >> build/keep.txt
		echo changed >> build/out.o
		mkdir -p .cache/v src/new && printf '*\n' > .cache/.gitignore && echo c > .cache/v/x
		printf '*\n' > src/new/.gitignore && echo n > src/new/n.go
	`)
	for _, opt := range []Options{{}, {Patch: true}} {
		d, err := Compute(up, project, opt)
		if err != nil {
			t.Fatal(err)
		}
		// A directory new in the view keeps its own rules (pytest's
		// cache): what it hides is new, and summarised, not hidden.
		want := []string{"added dir .cache", "modified file .gitignore", "modified file build/keep.txt", "modified file other.txt", "modified file src/a.go", "added dir src/new"}
		got := briefs(d.Changes)
		if !slices.Equal(got, want) {
			t.Errorf("changes:\n got %q\nwant %q\nignored %+v", got, want, d.Ignored)
		}
		var sums []string
		for _, ig := range d.Ignored {
			sums = append(sums, ig.Dir)
		}
		if want := []string{".cache/", ".git/", "build/", "src/"}; !slices.Equal(sums, want) {
			t.Errorf("ignored summaries %+v, want %q", d.Ignored, want)
		}
	}
}

// TestTrackedBelowRepository: a path the host's index tracks is listed,
// never summarised, when the project is a directory of the repository
// and when it is a linked worktree (its .git a file).
func TestTrackedBelowRepository(t *testing.T) {
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	build(t, repo, file("proj/.gitignore", "build/\n"), file("proj/build/keep.txt", "tracked\n"), file("proj/build/out.o", "obj\n"))
	git := exec.Command("sh", "-euc", `git init -q . && git add -f proj/.gitignore proj/build/keep.txt && git -c user.name=t -c user.email=t@t commit -qm init && git worktree add -q ../wt`)
	git.Dir = repo
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	for _, project := range []string{filepath.Join(repo, "proj"), filepath.Join(tmp, "wt", "proj")} {
		up := filepath.Join(t.TempDir(), "upper")
		inView(t, project, up, `echo changed >> build/keep.txt; echo changed >> build/out.o`)
		d, err := Compute(up, project, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := briefs(d.Changes), []string{"modified file build/keep.txt"}; !slices.Equal(got, want) {
			t.Errorf("%s: changes %q, want %q (ignored %+v)", project, got, want, d.Ignored)
		}
	}
}
