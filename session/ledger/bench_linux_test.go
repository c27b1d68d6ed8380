package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSync20k is the look at a layer of 20,000 files after a call
// that changed nothing.
func BenchmarkSync20k(b *testing.B) {
	dir := b.TempDir()
	project, upper := filepath.Join(dir, "p"), filepath.Join(dir, "j", ".overlay", "upper")
	os.MkdirAll(project, 0o755)
	os.MkdirAll(filepath.Join(upper, "layer"), 0o755)
	for i := range 20000 {
		os.WriteFile(filepath.Join(upper, "layer", fmt.Sprint(i)), nil, 0o644)
	}
	l := New(upper, project, nil)
	l.Sync()
	for b.Loop() {
		if _, err := l.Sync(); err != nil {
			b.Fatal(err)
		}
		l.Conflicts(1)
	}
}

// BenchmarkConflicts1k is the look for conflicts of a layer holding
// 1,000 copies of host files in 10 directories, the host unchanged.
func BenchmarkConflicts1k(b *testing.B) {
	dir := b.TempDir()
	project, upper := filepath.Join(dir, "p"), filepath.Join(dir, "j", ".overlay", "upper")
	for d := range 10 {
		for _, root := range []string{project, upper} {
			os.MkdirAll(filepath.Join(root, fmt.Sprint(d)), 0o755)
		}
	}
	l := New(upper, project, nil)
	l.Sync()
	for i := range 1000 {
		p := filepath.Join(fmt.Sprint(i%10), fmt.Sprint(i))
		os.WriteFile(filepath.Join(project, p), []byte("host\n"), 0o644)
		os.WriteFile(filepath.Join(upper, p), []byte("session\n"), 0o644)
	}
	l.floor = func(int64) int64 { return 1 << 62 }
	l.Sync()
	for b.Loop() {
		if c := l.Conflicts(1); len(c) != 0 {
			b.Fatal(c)
		}
	}
}
