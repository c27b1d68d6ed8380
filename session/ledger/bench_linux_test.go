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
