package layer

import (
	"strings"
	"testing"
)

func TestPatch(t *testing.T) {
	ten := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	tests := []struct {
		name        string
		host, upper []node
		opt         Options
		want        string
	}{{
		name:  "small edit",
		host:  []node{file("a.txt", ten)},
		upper: []node{file("a.txt", strings.Replace(ten, "5\n", "five\n", 1))},
		want: `diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -2,7 +2,7 @@
 2
 3
 4
-5
+five
 6
 7
 8
`,
	}, {
		name:  "added, deleted, mode",
		host:  []node{file("old.txt", "bye\n"), file("run.sh", "echo\n")},
		upper: []node{file("new.txt", "hello\nworld\n"), whiteout("old.txt"), exe("run.sh", "echo\n")},
		want: `diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
`,
	}, {
		name:  "binary",
		host:  []node{file("bin.dat", "a\x00b")},
		upper: []node{file("bin.dat", "a\x00c"), file("new.bin", strings.Repeat("x", 100)+"\x00")},
		want: `diff --git a/bin.dat b/bin.dat
Binary files a/bin.dat and b/bin.dat differ
diff --git a/new.bin b/new.bin
new file mode 100644
Binary files /dev/null and b/new.bin differ
`,
	}, {
		name:  "too large to diff as text",
		upper: []node{file("big.txt", strings.Repeat("line\n", maxText/5+1))},
		want: `diff --git a/big.txt b/big.txt
new file mode 100644
Binary files /dev/null and b/big.txt differ
`,
	}, {
		name:  "ignored left out",
		host:  []node{file(".gitignore", "*.log\n")},
		upper: []node{file("x.log", "log\n")},
		want:  "",
	}, {
		name:  "ignored with All",
		host:  []node{file(".gitignore", "*.log\n")},
		upper: []node{file("x.log", "log\n")},
		opt:   Options{All: true},
		want: `diff --git a/x.log b/x.log
new file mode 100644
--- /dev/null
+++ b/x.log
@@ -0,0 +1 @@
+log
`,
	}, {
		name:  "odd name quoted",
		upper: []node{file("a\tb", "x\n")},
		want: `diff --git "a/a\tb" "b/a\tb"
new file mode 100644
--- /dev/null
+++ "b/a\tb"
@@ -0,0 +1 @@
+x
`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, project := setup(t, tt.host, tt.upper)
			tt.opt.Patch = true
			d, err := Compute(up, project, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if string(d.Patch) != tt.want {
				t.Errorf("patch:\n%s\nwant:\n%s", d.Patch, tt.want)
			}
		})
	}
}

func TestPatcherCap(t *testing.T) {
	var p patcher
	big := strings.Repeat("x", maxPatch/2)
	for range 4 {
		p.add(big)
	}
	got := p.bytes()
	want := "# patch cut at 64 MiB: 2 more files left out\n"
	if len(got) != 2*len(big)+len(want) || !strings.HasSuffix(string(got), want) {
		t.Errorf("patch of %d bytes ending %q", len(got), got[len(got)-60:])
	}
}
