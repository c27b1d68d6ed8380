package jailfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Holders are the processes that hold a lock on dir (a jail's
// directory: its server, or jail-mcp prune), as /proc/locks names them,
// with their command lines; none when it names none this process can see
// (another pid namespace).
func Holders(dir *os.File) []Holder {
	fi, err := dir.Stat()
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	dev := uint64(st.Dev)
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Holder
	seen := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  READ 1234 fd:00:5678 0 EOF"; a waiter's
		// line starts "1: -> FLOCK".
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 || seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, Holder{PID: pid, Command: commandLine(pid)})
	}
	return out
}

// commandLine is pid's command line, its arguments joined by spaces and
// cut at 120 bytes; "" when it cannot be read.
func commandLine(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})))
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	// Shown as Go quotes it, without the quotes: a command line is
	// anyone's to choose, control characters included.
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}
