//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
)

// fifoReadScope are the words that declare the read side of host FIFOs
// in its whole scope: not the project and HOME only (the escape suite's
// fifo-read-outside vector, a known gap of both backends).
var fifoReadScope = []string{"FIFO opened for reading anywhere a call reads", "as root any FIFO, whatever its owner and mode"}

// TestFIFOReadDeclared: on each backend, doctor (its text and --json) and
// jail_status declare, under promise 2, that a host FIFO can be opened
// for reading wherever a call reads.
func TestFIFOReadDeclared(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		declared := func(where string, ps ...[]jail.Promise) {
			t.Helper()
			for _, list := range ps {
				for _, p := range list {
					if p.ID != 2 {
						continue
					}
					for _, w := range fifoReadScope {
						if !strings.Contains(p.Note, w) {
							t.Errorf("%s: promise 2 does not say %q: %s", where, w, p.Note)
						}
					}
					return
				}
			}
			t.Errorf("%s: no promise 2", where)
		}
		text := runInProcess(t, []string{"doctor", "--backend", b.Name}, cfgEnv())
		for _, w := range fifoReadScope {
			if !strings.Contains(text.stdout, w) {
				t.Errorf("doctor --backend %s does not say %q:\n%s", b.Name, w, text.stdout)
			}
		}
		js := runInProcess(t, []string{"doctor", "--json", "--backend", b.Name}, cfgEnv())
		var r struct {
			Guarantees *jail.Guarantees `json:"guarantees"`
		}
		if err := json.Unmarshal([]byte(js.stdout), &r); err != nil || r.Guarantees == nil {
			t.Fatalf("doctor --json --backend %s: %v\n%s", b.Name, err, js.stdout)
		}
		declared("doctor --json", r.Guarantees.Kept, r.Guarantees.NotKept)
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
		st := ts.Status()
		declared("jail_status", st.Guarantees.Kept, st.Guarantees.NotKept)
	})
}
