package jail

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
)

func TestParseStat(t *testing.T) {
	tail := " 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 %s 0 123 10000 %s 18446744073709551615"
	line := func(comm, state, ppid, threads, rss string) string {
		return "42 (" + comm + ") " + state + " " + ppid + fmt.Sprintf(tail, threads, rss)
	}
	tests := []struct {
		name string
		line string
		want Stat
		ok   bool
	}{
		{"plain", line("sleep", "S", "7", "1", "250"), Stat{State: 'S', PPid: 7, Flags: 4194560, Threads: 1, RSS: 250}, true},
		{"threads", line("python3", "R", "1", "3001", "4096"), Stat{State: 'R', PPid: 1, Flags: 4194560, Threads: 3001, RSS: 4096}, true},
		// A name may hold spaces and parentheses: the fields follow the last ')'.
		{"odd name", line("a) S 9 (b", "Z", "3", "1", "0"), Stat{State: 'Z', PPid: 3, Flags: 4194560, Threads: 1}, true},
		{"short", "42 (sh) S 7", Stat{State: 'S', PPid: 7}, true},
		{"no state", "42 (sh) ", Stat{}, false},
		{"no name", "42 sh S 7", Stat{}, false},
		{"empty", "", Stat{}, false},
		{"not digits", line("sh", "S", "x", "-1", "9z"), Stat{State: 'S', Flags: 4194560}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseStat([]byte(tt.line))
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseStat(%q) = %+v, %t; want %+v, %t", tt.line, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestReadStatSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no /proc here")
	}
	st, ok := ReadStat(strconv.Itoa(os.Getpid()))
	if !ok || st.State == 0 || st.PPid != os.Getppid() || st.Threads < 2 || st.RSS <= 0 {
		t.Errorf("ReadStat(self) = %+v, %t: want this process, its Go runtime's threads and pages", st, ok)
	}
}
