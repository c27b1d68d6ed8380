package jail

import "bytes"

// Stat is what jail-mcp reads of a process's /proc/<pid>/stat.
type Stat struct {
	State   byte  // R, S, Z...
	PPid    int   // its parent
	Flags   int64 // the kernel's PF_* flags of its task
	Threads int   // its tasks, each of which takes a pid as a process does
	RSS     int64 // resident pages
}

// ReadStat reads /proc/<pid>/stat (pid as named in /proc); where there
// is no /proc (macOS), it finds nothing. It is read every watchdog tick
// for every process of every running call: one read into a buffer on the
// stack, no allocation.
func ReadStat(pid string) (Stat, bool) {
	var buf [1024]byte // the first 24 fields take at most about 600
	n, err := readProc("/proc/"+pid+"/stat", buf[:])
	if err != nil {
		return Stat{}, false
	}
	return parseStat(buf[:n])
}

// parseStat parses a stat line, of which it needs the fields up to rss
// (the 24th) only. The command name in parentheses may hold spaces and
// parentheses of its own: the fields are read after the last ')'.
func parseStat(b []byte) (Stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, false
	}
	b = b[i+2:] // state ppid pgrp ...: field 3 on
	var st Stat
	for field := 3; field <= 24 && len(b) > 0; field++ {
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			j = len(b)
		}
		f := b[:j]
		switch field {
		case 3:
			if len(f) == 0 {
				return Stat{}, false
			}
			st.State = f[0]
		case 4:
			st.PPid = int(decimal(f))
		case 9:
			st.Flags = decimal(f)
		case 20:
			st.Threads = int(decimal(f))
		case 24:
			st.RSS = decimal(f)
		}
		b = b[min(j+1, len(b)):]
	}
	return st, st.State != 0
}

// decimal is the value of a field of digits, or 0 for anything else (a
// negative rss, say).
func decimal(f []byte) int64 {
	var n int64
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
