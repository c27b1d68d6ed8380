package layer

import (
	"slices"
	"testing"
)

func TestCompute(t *testing.T) {
	tests := []struct {
		name        string
		host, upper []node
		opt         Options
		want        []string
		ignored     []Summary
	}{{
		name:  "added",
		upper: []node{file("new.txt", "hi\n"), exe("run.sh", "#!/bin/sh\n")},
		want:  []string{"added file new.txt", "added file run.sh mode=0755"},
	}, {
		name:  "modified",
		host:  []node{file("a.txt", "one\n")},
		upper: []node{file("a.txt", "two\n")},
		want:  []string{"modified file a.txt"},
	}, {
		name:  "deleted file and directory",
		host:  []node{file("a.txt", "one\n"), file("d/x", "x"), file("d/e/y", "y")},
		upper: []node{whiteout("a.txt"), whiteout("d")},
		want:  []string{"deleted file a.txt", "deleted dir d", "deleted dir d/e", "deleted file d/e/y", "deleted file d/x"},
	}, {
		name:  "type changes",
		host:  []node{file("x", "x"), file("y/a", "a"), link("z", "x")},
		upper: []node{file("x/f", "f"), file("y", "y"), file("z", "z")},
		want: []string{
			"type_changed dir x host=file", "added file x/f",
			"type_changed file y host=dir", "deleted file y/a",
			"type_changed file z host=symlink",
		},
	}, {
		name:  "mode change only",
		host:  []node{file("run.sh", "#!/bin/sh\n"), dir("d")},
		upper: []node{exe("run.sh", "#!/bin/sh\n"), {"d", 'd', "", 0o700}},
		want:  []string{"modified dir d mode=0700", "modified file run.sh mode=0755"},
	}, {
		name:  "unchanged copy-ups",
		host:  []node{file("a.txt", "same\n"), file("src/b.txt", "same\n"), link("l", "a.txt"), fifo("p")},
		upper: []node{file("a.txt", "same\n"), file("src/b.txt", "same\n"), link("l", "a.txt"), fifo("p")},
		want:  []string{},
	}, {
		name:  "merged directory not listed",
		host:  []node{file("src/a.go", "a")},
		upper: []node{file("src/b.go", "b")},
		want:  []string{"added file src/b.go"},
	}, {
		name:  "directory added whole",
		upper: []node{file("new/a", "a"), file("new/sub/b", "bb"), dir("new/empty")},
		want:  []string{"added dir new", "added file new/a", "added dir new/empty", "added dir new/sub", "added file new/sub/b"},
	}, {
		name:  "opaque directory",
		host:  []node{file("o/keep", "k"), file("o/gone", "g"), file("o/s/x", "x"), file("o/edit", "1")},
		upper: []node{opaque("o"), file("o/keep", "k"), file("o/new", "n"), file("o/s/y", "y"), file("o/edit", "2")},
		want:  []string{"modified file o/edit", "deleted file o/gone", "added file o/new", "deleted file o/s/x", "added file o/s/y"},
	}, {
		name:  "opaque mark on a directory the host lacks, or on the upper root, hides nothing",
		host:  []node{file("top", "t")},
		upper: []node{opaque("fresh"), file("fresh/a", "a")},
		want:  []string{"added dir fresh", "added file fresh/a"},
	}, {
		name:  "whiteout of what the host no longer has",
		host:  []node{file("d/kept", "k")},
		upper: []node{whiteout("vanished"), whiteout("d/vanished")},
		want:  []string{},
	}, {
		name:  "special entries",
		host:  []node{file("secret", "s")},
		upper: []node{link("l", "/etc/passwd"), fifo("p"), link("secret", "../../etc/shadow")},
		want: []string{
			"added symlink l special -> /etc/passwd", "added fifo p special",
			"type_changed symlink secret host=file special -> ../../etc/shadow",
		},
	}, {
		name:  "hostile names escaped",
		upper: []node{file("a\nb", "x"), file("c\u202ed", "x"), file(`"q"`, "x"), link("t", "x\x1b[2Jy")},
		want: []string{
			`added file "\"q\""`, `added file "a\nb"`, `added file "c\u202ed"`,
			`added symlink t special -> "x\x1b[2Jy"`,
		},
	}, {
		name: "gitignore summarised",
		host: []node{
			file(".gitignore", "node_modules/\n*.log\n!keep.log\n!node_modules/keep.js\n# comment\n"),
			file(".git/info/exclude", "secret.txt\n"),
			file("src/main.go", "package main\n"),
		},
		upper: []node{
			file("node_modules/a/b.js", "0123456789"), file("node_modules/keep.js", "12345"),
			file("x.log", "log"), file("keep.log", "kept"), file("secret.txt", "s"),
			file("src/.gitignore", "gen/\n"), file("src/gen/out.txt", "out"), file("src/main.go", "package main\n\nfunc main() {}\n"),
			whiteout("src/x.log"), file(".git/index", "idx"),
		},
		// The view's new src/.gitignore ignores nothing: the rules are
		// the host's.
		want: []string{"added file keep.log", "added file src/.gitignore", "added dir src/gen", "added file src/gen/out.txt", "modified file src/main.go"},
		ignored: []Summary{
			{".git/", "added", 1, 3},
			{"node_modules/", "added", 2, 15},
			{"secret.txt", "added", 1, 1},
			{"x.log", "added", 1, 3},
		},
	}, {
		name: "gitignore as the host has it",
		host: []node{file(".gitignore", "*.tmp\n"), file("d/.gitignore", "*.out\n"), file("old.tmp", "o")},
		upper: []node{
			file(".gitignore", "*.bak\n"), whiteout("d/.gitignore"),
			file("a.tmp", "a"), file("a.bak", "b"), file("d/x.out", "x"), whiteout("old.tmp"),
		},
		// Sorted component by component: a directory's entries follow it.
		want:    []string{"modified file .gitignore", "added file a.bak", "deleted file d/.gitignore"},
		ignored: []Summary{{"a.tmp", "added", 1, 1}, {"d/", "added", 1, 1}, {"old.tmp", "deleted", 1, 1}},
	}, {
		name:  "gitignore with All",
		host:  []node{file(".gitignore", "node_modules/\n")},
		upper: []node{file("node_modules/a.js", "a"), file("src.js", "s")},
		opt:   Options{All: true},
		want:  []string{"added dir node_modules", "added file node_modules/a.js", "added file src.js"},
	}, {
		name:    "ignored deletions and mixed",
		host:    []node{file(".gitignore", "build/\n"), file("build/a.o", "aa"), file("build/b.o", "b")},
		upper:   []node{whiteout("build/a.o"), file("build/c.o", "ccc")},
		want:    []string{},
		ignored: []Summary{{"build/", "mixed", 2, 5}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, project := setup(t, tt.host, tt.upper)
			d, err := Compute(up, project, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := briefs(d.Changes); !slices.Equal(got, tt.want) {
				t.Errorf("changes:\n got %q\nwant %q", got, tt.want)
			}
			if tt.ignored == nil {
				tt.ignored = []Summary{}
			}
			if !slices.Equal(d.Ignored, tt.ignored) {
				t.Errorf("ignored:\n got %+v\nwant %+v", d.Ignored, tt.ignored)
			}
		})
	}
}
