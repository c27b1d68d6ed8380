package jail

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A call's write watch: which write the jail refused in the project.
//
// Tools hide the cause of a refused write (npm says ENOENT, a configure
// script blames the compiler, git stash exits 1 printing nothing), and a
// command's own output may lie. So the agent learns it from the kernel:
// before it starts a call's command, the call's thread loads a seccomp
// filter that reports to the agent (SECCOMP_RET_USER_NOTIF) each syscall
// that may write a path: an open for writing, creating or truncating, and
// every call that makes, removes, renames or links a name. The agent reads
// the path from the command's memory, resolves it against the command's
// working directory or descriptor, and lets the syscall go on unchanged
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE): the watch decides nothing, the
// jail's own layers still refuse what they refuse. A write the jail
// refuses is one that lands in the project outside the jail, since only
// the jail (and a few devices) is writable on every backend; the agent
// keeps the first such path of the call, and the count.
//
// Reads, which are most of a build's opens, are never reported: the
// filter tests open's flags itself.

// writeWatchCall is one kind of syscall the watch reports: the argument
// indexes of its paths and of their directory descriptors (-1: none, the
// working directory), and of its open flags (-1: not an open).
type writeWatchCall struct {
	nr      uint32
	paths   []int // the paths it writes
	dirfds  []int // per path: its directory descriptor's argument, or -1
	flags   int   // open's flags argument, or -1
	openHow bool  // openat2: flags in the struct at args[2]
	kind    writeKind
}

type writeKind int

const (
	writeOpen   writeKind = iota // refused if it would write or create
	writeCreate                  // mkdir, mknod, symlink, link: refused if the name is absent
	writeRemove                  // unlink, rmdir, truncate: refused if the name is present
	writeRename                  // refused if the source is present
)

// writeOpenFlags are open's flags that need a writable file or directory.
const writeOpenFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC

var writeWatchCalls = map[string][]writeWatchCall{
	"amd64": {
		{nr: 2, paths: []int{0}, dirfds: []int{-1}, flags: 1, kind: writeOpen},     // open
		{nr: 257, paths: []int{1}, dirfds: []int{0}, flags: 2, kind: writeOpen},    // openat
		{nr: 437, paths: []int{1}, dirfds: []int{0}, flags: -1, openHow: true},     // openat2
		{nr: 85, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeCreate}, // creat
		{nr: 83, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeCreate}, // mkdir
		{nr: 258, paths: []int{1}, dirfds: []int{0}, flags: -1, kind: writeCreate}, // mkdirat
		{nr: 133, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeCreate},
		{nr: 259, paths: []int{1}, dirfds: []int{0}, flags: -1, kind: writeCreate},
		{nr: 88, paths: []int{1}, dirfds: []int{-1}, flags: -1, kind: writeCreate}, // symlink
		{nr: 266, paths: []int{2}, dirfds: []int{1}, flags: -1, kind: writeCreate}, // symlinkat
		{nr: 86, paths: []int{1}, dirfds: []int{-1}, flags: -1, kind: writeCreate}, // link
		{nr: 265, paths: []int{3}, dirfds: []int{2}, flags: -1, kind: writeCreate}, // linkat
		{nr: 87, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeRemove}, // unlink
		{nr: 84, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeRemove}, // rmdir
		{nr: 263, paths: []int{1}, dirfds: []int{0}, flags: -1, kind: writeRemove}, // unlinkat
		{nr: 76, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeRemove}, // truncate
		{nr: 82, paths: []int{0, 1}, dirfds: []int{-1, -1}, flags: -1, kind: writeRename},
		{nr: 264, paths: []int{1, 3}, dirfds: []int{0, 2}, flags: -1, kind: writeRename},
		{nr: 316, paths: []int{1, 3}, dirfds: []int{0, 2}, flags: -1, kind: writeRename},
	},
	"arm64": {
		{nr: 56, paths: []int{1}, dirfds: []int{0}, flags: 2, kind: writeOpen},
		{nr: 437, paths: []int{1}, dirfds: []int{0}, flags: -1, openHow: true},
		{nr: 34, paths: []int{1}, dirfds: []int{0}, flags: -1, kind: writeCreate},  // mkdirat
		{nr: 33, paths: []int{1}, dirfds: []int{0}, flags: -1, kind: writeCreate},  // mknodat
		{nr: 36, paths: []int{2}, dirfds: []int{1}, flags: -1, kind: writeCreate},  // symlinkat
		{nr: 37, paths: []int{3}, dirfds: []int{2}, flags: -1, kind: writeCreate},  // linkat
		{nr: 35, paths: []int{1}, dirfds: []int{0}, flags: -1, kind: writeRemove},  // unlinkat
		{nr: 45, paths: []int{0}, dirfds: []int{-1}, flags: -1, kind: writeRemove}, // truncate
		{nr: 276, paths: []int{1, 3}, dirfds: []int{0, 2}, flags: -1, kind: writeRename},
	},
}

// writeWatchProgram is the watch's filter on goarch: the calls of
// writeWatchCalls notify (opens only with a flag of writeOpenFlags), every
// other call and every other ABI pass.
func writeWatchProgram(goarch string) ([]bpf.Instruction, error) {
	calls, ok := writeWatchCalls[goarch]
	if !ok {
		return nil, fmt.Errorf("no write watch for %s", goarch)
	}
	audit := seccompArches[goarch][0].audit
	allow := bpf.RetConstant{Val: seccompRetAllow}
	notify := bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: audit, SkipTrue: 1},
		allow,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	var always []uint32
	for _, c := range calls {
		if c.flags < 0 {
			always = append(always, c.nr)
			continue
		}
		// An open: only with a writing flag.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: c.nr, SkipTrue: 4},
			bpf.LoadAbsolute{Off: uint32(offArg0 + 8*c.flags), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: writeOpenFlags, SkipFalse: 1},
			notify,
			allow,
		)
	}
	n := len(always)
	for i, nr := range always {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(n - i)})
	}
	return append(prog, allow, notify), nil
}

var writeWatchFilter = sync.OnceValues(func() ([]byte, error) {
	prog, err := writeWatchProgram(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, ins := range raw {
		b.Write([]byte{byte(ins.Op), byte(ins.Op >> 8), ins.Jt, ins.Jf,
			byte(ins.K), byte(ins.K >> 8), byte(ins.K >> 16), byte(ins.K >> 24)})
	}
	return b.Bytes(), nil
})

// seccompNotif and seccompNotifResp are the kernel's struct seccomp_notif
// and struct seccomp_notif_resp.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// writeWatch is a call's watch: the listener of its filter and what it
// saw. The call's thread serves it, in its poll loop: that thread is in
// the command's Landlock domain, whose processes it may read (an agent
// thread of the domain above may not, Landlock refusing it their memory),
// and the thread's own syscalls after the filter is loaded must never be
// ones the filter reports, since it would wait on itself.
type writeWatch struct {
	listener int
	project  string
	free     []string // where in the project writes are not refused
	first    string
	refused  int
}

// startWriteWatch loads the watch's filter on the calling thread (the
// call's, before it starts the command, which inherits it). project is
// where writes are refused; jail and writable (--writable), inside it,
// are where they are not.
func startWriteWatch(project, jail string, writable ...string) (*writeWatch, error) {
	prog, err := writeWatchFilter()
	if err != nil {
		return nil, err
	}
	fprog, ins := sockFprog(prog)
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(ins)
	if errno != 0 {
		return nil, fmt.Errorf("write watch: %w", errno)
	}
	unix.CloseOnExec(int(fd))
	// Wake the command on the CPU that answers it, where the kernel can.
	unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, 1)
	return &writeWatch{listener: int(fd), project: project, free: append([]string{jail}, writable...)}, nil
}

// watchRound bounds the notifications a call's thread answers before it
// looks at the rest of its loop again.
const watchRound = 64

// pending answers the notifications there are now, at most max (0: all),
// without waiting.
func (w *writeWatch) pending(max int) {
	for i := 0; max == 0 || i < max; i++ {
		fds := []unix.PollFd{{Fd: int32(w.listener), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 0); n <= 0 || fds[0].Revents&unix.POLLIN == 0 {
			return
		}
		w.answer()
	}
}

// end answers what is still pending (so that no process waits on a
// listener going away), closes the listener and returns the first refused
// path and how many writes were refused.
func (w *writeWatch) end() (string, int) {
	w.pending(0)
	unix.Close(w.listener)
	return w.first, w.refused
}

// answer takes one notification, which poll said is there (else RECV
// would block, whatever O_NONBLOCK says; one withdrawn since, its process
// killed, gives ENOENT at once), looks at it and lets its call go on.
func (w *writeWatch) answer() {
	var n seccompNotif
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(w.listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return
	}
	path := w.look(&n)
	resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	unix.Syscall(unix.SYS_IOCTL, uintptr(w.listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	if path != "" {
		if w.refused == 0 {
			w.first = path
		}
		w.refused++
	}
}

// look returns the path of the project the notified call would write, if
// the jail refuses that write, or "".
func (w *writeWatch) look(n *seccompNotif) string {
	var c *writeWatchCall
	for i, k := range writeWatchCalls[runtime.GOARCH] {
		if uint32(n.Nr) == k.nr {
			c = &writeWatchCalls[runtime.GOARCH][i]
			break
		}
	}
	if c == nil {
		return ""
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(int(n.Pid)) + "/mem")
	if err != nil {
		return ""
	}
	defer mem.Close()
	kind, flags := c.kind, uint64(0)
	if c.flags >= 0 {
		flags = n.Args[c.flags]
	}
	if c.openHow {
		var how [8]byte
		if _, err := mem.ReadAt(how[:], int64(n.Args[2])); err != nil {
			return ""
		}
		flags = uint64(*(*uint64)(unsafe.Pointer(&how[0])))
		if flags&writeOpenFlags == 0 {
			return ""
		}
	}
	var paths []string
	for i, arg := range c.paths {
		p := readCString(mem, n.Args[arg])
		if p == "" {
			return ""
		}
		if !filepath.IsAbs(p) {
			base := "cwd"
			if d := c.dirfds[i]; d >= 0 && int32(n.Args[d]) != unix.AT_FDCWD {
				base = "fd/" + strconv.Itoa(int(int32(n.Args[d])))
			}
			dir, err := os.Readlink("/proc/" + strconv.Itoa(int(n.Pid)) + "/" + base)
			if err != nil {
				return ""
			}
			p = filepath.Join(dir, p)
		}
		paths = append(paths, filepath.Clean(p))
	}
	exists := func(p string) bool {
		_, err := os.Lstat(p)
		return err == nil
	}
	if kind == writeRename && !exists(paths[0]) {
		// No source: the rename fails on its own.
		return ""
	}
	for _, p := range paths {
		if !Within(p, w.project) || slices.ContainsFunc(w.free, func(f string) bool { return Within(p, f) }) {
			continue
		}
		switch kind {
		case writeOpen:
			there := exists(p)
			if flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_TRUNC) != 0 && (there || flags&unix.O_CREAT != 0) ||
				flags&unix.O_CREAT != 0 && !there {
				return p
			}
		case writeCreate:
			if !exists(p) {
				return p
			}
		case writeRemove:
			if exists(p) {
				return p
			}
		case writeRename:
			return p
		}
	}
	return ""
}

// readCString reads a NUL-terminated path at addr of mem.
func readCString(mem *os.File, addr uint64) string {
	if addr == 0 {
		return ""
	}
	var buf [unix.PathMax]byte
	var out []byte
	for off := 0; off < len(buf); {
		// Read up to the end of the page, which may be the mapping's.
		chunk := 4096 - int((addr+uint64(off))%4096)
		n, _ := mem.ReadAt(buf[off:min(off+chunk, len(buf))], int64(addr)+int64(off))
		if n <= 0 {
			return ""
		}
		if i := bytes.IndexByte(buf[off:off+n], 0); i >= 0 {
			out = buf[:off+i]
			return string(out)
		}
		off += n
	}
	return ""
}
