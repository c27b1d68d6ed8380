package jail

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// inDomain runs fn on a thread of its own in a new scoped Landlock domain
// (as a call's thread of a session agent is) after starting n sleeps from
// it, so that they are the domain's, and kills them after.
func inDomain(tb testing.TB, n int, fn func()) {
	tb.Helper()
	errc := make(chan error, 1)
	FreshThread(func() {
		fd, err := scopeRuleset(nil)
		if err == nil {
			err = restrictThread(fd)
		}
		if err != nil {
			errc <- err
			return
		}
		var cmds []*exec.Cmd
		for range n {
			c := exec.Command("/bin/sleep", "3600")
			if err = c.Start(); err != nil {
				break
			}
			cmds = append(cmds, c)
		}
		if err == nil {
			fn()
		}
		// Before the test goes on: it may end the test binary.
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
		errc <- err
	})
	if err := <-errc; err != nil {
		tb.Fatalf("processes in a domain: %v", err)
	}
}

// BenchmarkDomainCount is a session agent's look at a running call,
// every TreeInterval, for a call of 50 processes: its processes, their
// tasks and memory, and what the (here: host's) shared memory holds.
// "look" is the look while the host's shared memory stays put (the
// memfds are scanned every memfdEvery looks); "scan" scans every
// process's descriptors every look, as while it keeps growing.
func BenchmarkDomainCount(b *testing.B) {
	shm, err := unix.Open("/dev/shm", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(shm)
	for _, bb := range []struct {
		name string
		scan bool
	}{{"look", false}, {"scan", true}} {
		b.Run(bb.name, func(b *testing.B) {
			inDomain(b, 50, func() {
				var memfds MemfdScan
				if procs, c := domainCount(false, &memfds); procs != 50 || c.Tasks != 50 {
					b.Errorf("counted %d processes, %d tasks; want 50", procs, c.Tasks)
					return
				}
				for b.Loop() {
					if bb.scan {
						memfds.looked = false
					}
					_, c := domainCount(false, &memfds)
					c.Shared = sandboxShared(shm)
				}
			})
		})
	}
}
