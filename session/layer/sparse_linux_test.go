package layer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// makeSparse makes name a file of size bytes (apparent) holding data
// 4 KiB chunks spread over it, and returns its bytes on disk.
func makeSparse(t *testing.T, name string, size int64, chunks int) int64 {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("data"), 1024)
	for i := range chunks {
		if _, err := f.WriteAt(chunk, int64(i)*(size/int64(chunks))); err != nil {
			t.Fatal(err)
		}
	}
	return onDisk(t, name)
}

func onDisk(t *testing.T, name string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestApplySparse: a sparse file of the layer (96 MiB apparent, 224 KiB
// on disk) reaches the host with its holes, byte for byte.
func TestApplySparse(t *testing.T) {
	up, project := setup(t, []node{file("keep", "k")}, nil)
	used := makeSparse(t, filepath.Join(up, "sparse.img"), 96<<20, 56)
	if used > 1<<20 {
		t.Fatalf("the layer's file system keeps no holes: %d bytes on disk", used)
	}
	res, err := Apply(up, project, []string{"sparse.img"}, false)
	if err != nil || len(res.Refused) > 0 || len(res.Changes) != 1 {
		t.Fatalf("Apply = %+v, %v", res, err)
	}
	host := filepath.Join(project, "sparse.img")
	fi, err := os.Stat(host)
	if err != nil || fi.Size() != 96<<20 {
		t.Fatalf("the host's file: %v, %v", fi, err)
	}
	if got := onDisk(t, host); got > 2*used+64<<10 {
		t.Errorf("the host's file takes %d bytes on disk, the layer's %d: its holes were filled", got, used)
	}
	want := make([]byte, 96<<20)
	chunk := bytes.Repeat([]byte("data"), 1024)
	for i := range 56 {
		copy(want[int64(i)*((96<<20)/56):], chunk)
	}
	if got, err := os.ReadFile(host); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the host's file differs from the layer's (%v)", err)
	}
}

// TestApplyPastFreeSpace: an apply whose files' apparent size is more
// than the project's file system has free is refused, and writes
// nothing, not even its staging directory.
func TestApplyPastFreeSpace(t *testing.T) {
	up, project := setup(t, []node{file("keep", "k")}, []node{file("small", "s")})
	var fs unix.Statfs_t
	if err := unix.Statfs(project, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	// Not assertRefused: its hash would read the whole file.
	makeSparse(t, filepath.Join(up, "huge.img"), free+1<<30, 4)
	for _, dry := range []bool{true, false} {
		res, err := Apply(up, project, []string{"."}, dry)
		if err != nil || len(res.Changes) != 0 || len(res.Refused) != 1 || res.Refused[0].Path != "huge.img" ||
			!strings.HasPrefix(res.Refused[0].Reason, "the project's file system has") {
			t.Fatalf("dry run %v: Apply = %+v, %v", dry, res, err)
		}
	}
	names, err := os.ReadDir(project)
	if err != nil || len(names) != 1 {
		t.Errorf("the project holds %v (%v), want keep alone", names, err)
	}
}

func TestApplyBound(t *testing.T) {
	up, project := setup(t, nil, []node{file("a.txt", "a")})
	makeSparse(t, filepath.Join(up, "big.img"), 96<<20, 2)
	makeSparse(t, filepath.Join(up, "mid.img"), 40<<20, 2)
	hostBefore := treeHash(t, project)
	res, err := ApplyBounded(up, project, []string{"."}, false, 64<<20)
	if err != nil || len(res.Refused) != 1 || res.Refused[0].Path != "big.img" || !strings.Contains(res.Refused[0].Reason, "over the bound of 67108864 bytes") {
		t.Fatalf("ApplyBounded = %+v, %v", res, err)
	}
	if treeHash(t, project) != hostBefore {
		t.Error("the refused apply changed the project")
	}
	res, err = ApplyBounded(up, project, []string{"a.txt", "mid.img"}, false, 64<<20)
	if err != nil || len(res.Refused) != 0 || len(res.Changes) != 2 {
		t.Fatalf("ApplyBounded of what fits = %+v, %v", res, err)
	}
}

// TestSumFileBytesAlone: a long file's hash is its bytes', block by
// block, whatever the file system keeps as holes: a hole filled with
// written zeros leaves it as it was, and a byte changed in a hole does not.
func TestSumFileBytesAlone(t *testing.T) {
	name := filepath.Join(t.TempDir(), "long.img")
	size := int64(plainMax + 12<<20 + 12345)
	if used := makeSparse(t, name, size, 3); used > 1<<20 {
		t.Skipf("this file system keeps no holes (%d bytes on disk)", used)
	}
	// What the hash is, from the bytes alone.
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := sha256.New()
	fmt.Fprintf(want, "sha256 of %d-byte blocks, %d bytes\n", hashBlock, size)
	buf := make([]byte, hashBlock)
	for off := int64(0); off < size; off += hashBlock {
		n := min(hashBlock, size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(buf[:n])
		want.Write(s[:])
	}
	sum := func() string {
		t.Helper()
		got, err := sumFile(f, size)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := sum(); got != hex.EncodeToString(want.Sum(nil)) {
		t.Fatalf("sumFile = %s, want the blocks' %x", got, want.Sum(nil))
	}
	before := sum()
	w, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Zeros written over a hole, across a block's edge, and in the last,
	// short block.
	for _, off := range []int64{5 << 20, 7<<20 - 100, size - 10} {
		if _, err := w.WriteAt(make([]byte, 100)[:min(100, size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
	if got := sum(); got != before {
		t.Errorf("zeros written over holes changed the hash: %s, was %s", got, before)
	}
	if _, err := w.WriteAt([]byte{1}, 9<<20); err != nil {
		t.Fatal(err)
	}
	if got := sum(); got == before {
		t.Errorf("a byte written in a hole left the hash as it was")
	}
}
