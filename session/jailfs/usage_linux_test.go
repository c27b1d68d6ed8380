package jailfs

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// usageWatch is a usage watch over a new jail base, and the base's path.
func usageWatch(t *testing.T) (*UsageWatch, string) {
	t.Helper()
	dir := canonTempDir(t)
	base, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	w := NewUsageWatch(slog.New(slog.DiscardHandler), base)
	t.Cleanup(w.Close)
	if w.fd < 0 {
		t.Fatal("no usage watch: inotify is unavailable here")
	}
	return w, dir
}

// watchedJail is a jail of a usage watch's base.
type watchedJail struct {
	w    *UsageWatch
	name string
	Path string
	root *os.Root
}

func newJail(t *testing.T, w *UsageWatch, dir, name string) *watchedJail {
	t.Helper()
	j := &watchedJail{w: w, name: name, Path: filepath.Join(dir, name)}
	if err := os.Mkdir(j.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(j.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	j.root = root
	return j
}

// exactUsage is the jail's usage as the watch keeps it.
func (j *watchedJail) exactUsage() (Usage, bool) { return j.w.Usage(j.name) }

// reset empties the jail as a session's reset does: not followed event by
// event, but scanned again at the next look.
func (j *watchedJail) reset(t *testing.T) {
	t.Helper()
	j.w.Forget(j.name)
	if _, err := EmptyRoot(j.root); err != nil {
		t.Fatal(err)
	}
}

// walked is the jail's usage by a walk that sees everything: directories
// a step left without rights are opened up for it.
func walked(t *testing.T, s *watchedJail) Usage {
	t.Helper()
	u, err := CountRoot(s.root)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUsageWatch changes a jail the ways commands do, a look after each
// change, and the watched usage must be what a walk finds.
func TestUsageWatch(t *testing.T) {
	w, dir := usageWatch(t)
	s := newJail(t, w, dir, "watched")
	j := s.Path
	sh := func(t *testing.T, script string) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = j
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	steps := []struct{ name, script string }{
		{"skeleton", `true`},
		{"write", `printf 12345 > a`},
		{"append", `printf 0123456789 >> a`},
		{"truncate down", `truncate -s 2 a`},
		{"sparse", `truncate -s 1M sparse`},
		{"fallocate", `fallocate -l 64K alloc`},
		{"nested", `mkdir -p d1/d2/d3 && echo one > d1/f && echo two > d1/d2/f && echo three > d1/d2/d3/f`},
		{"rename a directory", `mv d1 d1b`},
		{"move a directory up", `mv d1b/d2 d2top`},
		{"write in a moved directory", `echo more >> d2top/d3/f && echo new > d2top/new`},
		{"remove a tree", `rm -rf d1b`},
		{"symlinks", `ln -s / root-link && ln -s /usr/bin big-link && ln -s a a-link`},
		{"hard link", `ln a a2`},
		{"fifo", `mkfifo fifo`},
		{"hard links in two directories", `mkdir hl && ln a hl/a3 && ln a hl/a4 && echo grow >> hl/a3`},
		{"long symlinks", `for i in 1 2 3; do ln -s "$(head -c 3000 /dev/zero | tr '\0' x)" long$i; done`},
		{"a grown directory", `mkdir wide && cd wide && i=0; while [ $i -lt 400 ]; do mkdir d$i; i=$((i+1)); done`},
		{"a socket", `python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'`},
		{"file over file", `echo replaced > b && mv -f b a`},
		{"directory over file", `rm a2 && mkdir a2 && echo in > a2/x`},
		{"file over directory", `rm -rf a2 && echo flat > a2`},
		{"locked after writing", `mkdir locked && head -c 3000 /dev/zero > locked/f && chmod 000 locked`},
		{"written while opened", `chmod 700 locked && head -c 5000 /dev/zero > locked/g && mkdir locked/sub && echo x > locked/sub/h && chmod 000 locked`},
		{"unlocked", `chmod 700 locked`},
		{"delete", `rm -f sparse alloc fifo`},
		{"many", `mkdir many && cd many && i=0; while [ $i -lt 300 ]; do echo $i > f$i; i=$((i+1)); done`},
		{"a tree moved in whole", `mkdir -p .tmp/stage/x/y && echo z > .tmp/stage/x/y/z && mv .tmp/stage staged`},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			sh(t, st.script)
			got, ok := s.exactUsage()
			if !ok {
				t.Fatal("the usage watch does not keep the jail")
			}
			if want := walked(t, s); got != want {
				t.Errorf("watched usage %+v, a walk finds %+v", got, want)
			}
		})
	}
}

// TestUsageWatchOverflow: more events than the kernel queues between two
// looks, and the jail is scanned again.
func TestUsageWatchOverflow(t *testing.T) {
	w, base := usageWatch(t)
	s := newJail(t, w, base, "flood")
	if _, ok := s.exactUsage(); !ok {
		t.Fatal("the usage watch does not keep the jail")
	}
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	var queued int
	fmt.Sscan(strings.TrimSpace(string(b)), &queued)
	dir := filepath.Join(s.Path, "flood")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.exactUsage(); !ok {
		t.Fatal("lost the jail")
	}
	for i := range queued + 100 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.exactUsage()
	if want := walked(t, s); got != want {
		t.Errorf("after %d files: watched %+v, a walk finds %+v", queued+100, got, want)
	}
}

// TestUsageWatchRandom makes random changes with looks between some of
// them; every look must agree with a walk.
func TestUsageWatchRandom(t *testing.T) {
	w, dir := usageWatch(t)
	s := newJail(t, w, dir, "random")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed>>1))
	dirs := []string{"."}
	var files []string
	pick := func(list []string) string { return list[r.IntN(len(list))] }
	for i := range 600 {
		p := func(name string) string { return filepath.Join(s.Path, name) }
		switch r.IntN(9) {
		case 0, 1:
			f := filepath.Join(pick(dirs), fmt.Sprintf("f%d", i))
			if os.WriteFile(p(f), make([]byte, r.IntN(5000)), 0o600) == nil {
				files = append(files, f)
			}
		case 2:
			if len(files) > 0 {
				if f, err := os.OpenFile(p(pick(files)), os.O_APPEND|os.O_WRONLY, 0); err == nil {
					f.Write(make([]byte, r.IntN(3000)))
					f.Close()
				}
			}
		case 3:
			if len(files) > 0 {
				os.Truncate(p(pick(files)), int64(r.IntN(10000)))
			}
		case 4:
			d := filepath.Join(pick(dirs), fmt.Sprintf("d%d", i))
			if os.Mkdir(p(d), 0o700) == nil {
				dirs = append(dirs, d)
			}
		case 5:
			if len(files) > 0 {
				os.Remove(p(pick(files)))
			}
		case 6:
			// A directory moved elsewhere, with what it holds.
			if len(dirs) > 1 {
				from := pick(dirs[1:])
				to := filepath.Join(pick(dirs), fmt.Sprintf("m%d", i))
				if os.Rename(p(from), p(to)) == nil {
					dirs = append(dirs, to)
				}
			}
		case 7:
			if len(dirs) > 1 {
				os.RemoveAll(p(pick(dirs[1:])))
			}
		case 8:
			os.Symlink("/", p(filepath.Join(pick(dirs), fmt.Sprintf("l%d", i))))
		}
		if r.IntN(4) == 0 {
			got, ok := s.exactUsage()
			if !ok {
				t.Fatal("the usage watch does not keep the jail")
			}
			if want := walked(t, s); got != want {
				t.Fatalf("step %d (seed %d): watched %+v, a walk finds %+v", i, seed, got, want)
			}
		}
	}
}

// TestUsageWatchSessions: each session's jail is its own; a reset and the
// end of a session (Forget) stop its watches.
func TestUsageWatchSessions(t *testing.T) {
	w, dir := usageWatch(t)
	a, b := newJail(t, w, dir, "a"), newJail(t, w, dir, "b")
	ua, _ := a.exactUsage()
	ub, _ := b.exactUsage()
	if err := os.WriteFile(filepath.Join(a.Path, "f"), make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.exactUsage(); got.Bytes != ua.Bytes+4096 || got.Files != ua.Files+1 {
		t.Errorf("a: %+v, want one more file of %d bytes", got, ua.Bytes+4096)
	}
	if got, _ := b.exactUsage(); got != ub {
		t.Errorf("b changed with a: %+v, was %+v", got, ub)
	}
	a.reset(t)
	if got, _ := a.exactUsage(); got != walked(t, a) || got.Files != 0 {
		t.Errorf("after reset: %+v", got)
	}
	watches := len(w.wds)
	w.Forget(a.name)
	w.mu.Lock()
	left := len(w.wds)
	w.mu.Unlock()
	if left >= watches {
		t.Errorf("watches after the session ended: %d, before %d", left, watches)
	}
}

// TestUsageWatchNeverLeavesTheJail: a directory swapped for a symlink
// while the server looks is never followed out, nor its mode changed.
func TestUsageWatchNeverLeavesTheJail(t *testing.T) {
	w, dir := usageWatch(t)
	s := newJail(t, w, dir, "swap")
	outside := canonTempDir(t)
	if err := os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outside, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(outside, 0o700)
	var before unix.Stat_t
	unix.Stat(outside, &before)
	for i := range 200 {
		d := filepath.Join(s.Path, "d")
		os.Remove(d)
		if i%2 == 0 {
			os.Mkdir(d, 0o000)
		} else {
			os.Symlink(outside, d)
		}
		s.exactUsage()
	}
	os.Remove(filepath.Join(s.Path, "d"))
	got, _ := s.exactUsage()
	if want := walked(t, s); got != want || got.Bytes >= 1<<20 {
		t.Errorf("watched %+v, a walk finds %+v", got, want)
	}
	var after unix.Stat_t
	unix.Stat(outside, &after)
	if after.Mode != before.Mode || after.Ctim != before.Ctim {
		t.Errorf("the directory outside changed: mode %o -> %o", before.Mode, after.Mode)
	}
}

// TestUsageWatchBudget: a jail with more directories than the watches the
// manager may use is walked instead, and the watches stay within the
// budget: a command cannot take the user's watches from other programs.
func TestUsageWatchBudget(t *testing.T) {
	w, dir := usageWatch(t)
	w.budget = 20
	s := newJail(t, w, dir, "dirs")
	for i := range 30 {
		if err := os.MkdirAll(filepath.Join(s.Path, "many", fmt.Sprint(i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.Path, "many", "0", "f"), []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.exactUsage(); ok {
		t.Error("a jail of 38 directories is watched with a budget of 20")
	}
	if n := len(w.wds); n > 20 {
		t.Errorf("%d watches held, budget 20", n)
	}
	// Emptied by a reset, it is watched again.
	s.reset(t)
	if u, ok := s.exactUsage(); !ok || u != walked(t, s) {
		t.Errorf("after reset: %+v %t", u, ok)
	}
}

// TestUsageWatchChanges: the number of a directory two levels down moves
// when an entry below it is made, written in place or removed, and not
// for a change elsewhere in the jail; a jail not watched says so.
func TestUsageWatchChanges(t *testing.T) {
	w, dir := usageWatch(t)
	j := newJail(t, w, dir, "s")
	if err := os.MkdirAll(filepath.Join(j.Path, ".overlay", "upper", "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Changes("s", ".overlay/upper"); ok {
		t.Fatal("a jail never looked at is numbered")
	}
	if _, ok := j.exactUsage(); !ok {
		t.Fatal("the jail is not watched")
	}
	n := func() uint64 {
		t.Helper()
		v, ok := w.Changes("s", ".overlay/upper")
		if !ok {
			t.Fatal("the watched jail is not numbered")
		}
		return v
	}
	last := n()
	for _, step := range []struct {
		name  string
		do    func() error
		moves bool
	}{
		{"nothing", func() error { return nil }, false},
		{"a file in HOME", func() error { return os.WriteFile(filepath.Join(j.Path, "f"), []byte("x"), 0o644) }, false},
		{"a file in the layer", func() error { return os.WriteFile(filepath.Join(j.Path, ".overlay/upper/d/f"), []byte("x"), 0o644) }, true},
		{"a write in place", func() error {
			f, err := os.OpenFile(filepath.Join(j.Path, ".overlay/upper/d/f"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			f.Write([]byte("y"))
			return f.Close()
		}, true},
		{"a work directory", func() error { return os.Mkdir(filepath.Join(j.Path, ".overlay/work"), 0o755) }, false},
		{"a removal", func() error { return os.Remove(filepath.Join(j.Path, ".overlay/upper/d/f")) }, true},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		if now := n(); (now != last) != step.moves {
			t.Errorf("%s: the number went from %d to %d", step.name, last, now)
		} else {
			last = now
		}
	}
}
