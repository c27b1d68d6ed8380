package layer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// These tests mount a real overlayfs as --overlay does (userxattr, in an
// unprivileged user namespace), run commands in the view, and check what
// the kernel left in the upper layer against Compute and Apply.

func TestOverlayRoundTrip(t *testing.T) {
	if err := overlayWorks(); err != nil {
		t.Skipf("no overlayfs in an unprivileged user namespace (unshare -Urm): %v", err)
	}
	tmp := t.TempDir()
	project := filepath.Join(tmp, "project")
	up := filepath.Join(tmp, "jail", ".overlay", "upper")
	build(t, project,
		file(".gitignore", "node_modules/\n"),
		file("a.txt", "1\n2\n3\n"), file("b.txt", "b\n"), file("same.txt", "same\n"),
		file("d/x", "x\n"), file("d/e/y", "y\n"),
		file("o/keep", "k\n"), file("o/gone", "g\n"),
		file("run.sh", "echo\n"), file("t", "file\n"),
	)
	inView(t, project, up, `
		echo 2b >> a.txt
		rm b.txt
		chmod 600 same.txt && chmod 644 same.txt
		rm -r d
		rm -r o && mkdir o && echo k > o/keep && echo n > o/new
		chmod +x run.sh
		rm t && mkdir t && echo in > t/f
		mkdir -p node_modules/p && echo js > node_modules/p/i.js
		mkdir newdir && echo f > newdir/f
	`)

	d, err := Compute(up, project, Options{Patch: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"modified file a.txt",
		"deleted file b.txt",
		"deleted dir d", "deleted dir d/e", "deleted file d/e/y", "deleted file d/x",
		"added dir newdir", "added file newdir/f",
		"deleted file o/gone", "added file o/new",
		"modified file run.sh mode=0755",
		"type_changed dir t host=file", "added file t/f",
	}
	if got := briefs(d.Changes); !slices.Equal(got, want) {
		t.Errorf("changes:\n got %q\nwant %q", got, want)
	}
	if want := []Summary{{"node_modules/", "added", 1, 3}}; !slices.Equal(d.Ignored, want) {
		t.Errorf("ignored %+v, want %+v", d.Ignored, want)
	}
	wantHunk := "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n 1\n 2\n 3\n+2b\n"
	if !strings.Contains(string(d.Patch), wantHunk) {
		t.Errorf("patch:\n%s\nwant the hunk:\n%s", d.Patch, wantHunk)
	}

	res, err := Apply(up, project, []string{"."}, false)
	if err != nil || len(res.Refused) != 0 || len(res.Changes) != len(want) {
		t.Fatalf("apply: %v, refused %v, applied %q", err, res.Refused, briefs(res.Changes))
	}
	if got, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(got) != "1\n2\n3\n2b\n" {
		t.Errorf("host a.txt holds %q", got)
	}
	res, err = Apply(up, project, []string{"node_modules"}, false)
	if err != nil || len(res.Refused) != 0 {
		t.Fatalf("apply node_modules: %v, refused %v", err, res.Refused)
	}

	// Everything applied: the host is the view, and the upper layer holds
	// nothing but what equals the host (a copy-up of same.txt).
	if got := upperNames(t, up); !slices.Equal(got, []string{"same.txt"}) {
		t.Errorf("upper layer holds %q", got)
	}
	if view, host := viewHash(t, project, up), hostListing(t, project); view != host {
		t.Errorf("the view and the host differ:\nview:\n%s\nhost:\n%s", view, host)
	}
	d, err = Compute(up, project, Options{All: true})
	if err != nil || len(d.Changes) != 0 {
		t.Errorf("left after the apply: %q, %v", briefs(d.Changes), err)
	}
}

func TestOverlayConflict(t *testing.T) {
	tmp := t.TempDir()
	project := filepath.Join(tmp, "project")
	up := filepath.Join(tmp, "jail", ".overlay", "upper")
	build(t, project, file("a.txt", "host\n"), file("b.txt", "b\n"), file("c.txt", "c\n"), file("late.txt", "l\n"))
	tick()
	inView(t, project, up, `echo view >> a.txt; rm b.txt; echo view >> c.txt`)
	tick()
	for _, p := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(project, p), []byte("edited on the host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	assertRefused(t, up, project, []string{"."}, []refusal{{"a.txt", "conflict"}, {"b.txt", "conflict"}})

	// A host file edited before the view copied it is no conflict.
	res, err := Apply(up, project, []string{"c.txt"}, false)
	if err != nil || len(res.Refused) != 0 {
		t.Fatalf("apply c.txt: %v, refused %v", err, res.Refused)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "c.txt")); string(got) != "c\nview\n" {
		t.Errorf("host c.txt holds %q", got)
	}
}
