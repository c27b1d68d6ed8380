package jail

import (
	"bytes"
	"os"
	"strconv"
)

// Stat is what jail-mcp reads of a process's /proc/<pid>/stat.
type Stat struct {
	State byte  // R, S, Z...
	PPid  int   // its parent
	RSS   int64 // resident pages
}

// ReadStat reads /proc/<pid>/stat (pid as named in /proc); where there
// is no /proc (macOS), it finds nothing. The command
// name in parentheses may hold spaces and parentheses of its own: the
// fields are read after the last ')'.
func ReadStat(pid string) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, false
	}
	f := bytes.Fields(b[i+2:]) // state ppid pgrp ... rss is the 22nd
	if len(f) < 2 || len(f[0]) == 0 {
		return Stat{}, false
	}
	st := Stat{State: f[0][0]}
	st.PPid, _ = strconv.Atoi(string(f[1]))
	if len(f) > 21 {
		st.RSS, _ = strconv.ParseInt(string(f[21]), 10, 64)
	}
	return st, true
}
