//go:build linux || darwin

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// terminalState is what a command handed the terminal as its standard
// input can change and leave changed after it ends.
//
// The command has no other hold on the terminal: its standard output and
// error are pipes jail-mcp copies from (session's run), every other
// descriptor is closed on exec, and every backend starts it in a session
// of its own, without a controlling terminal, so it cannot open /dev/tty.
// Termios, window size and exclusive mode belong to the terminal, so
// restoring them through fd 0 restores a stdout or stderr on the same
// terminal too; the file status flags belong to the open file description,
// which a shell shares between fds 0, 1 and 2 by duplicating one open.
// What the command prints reaches the terminal as bytes: the emulator state
// escape sequences set (alternate screen, hidden cursor) no ioctl restores.
type terminalState struct {
	f         *os.File
	termios   unix.Termios
	winsize   unix.Winsize
	flags     int
	exclusive bool
}

// saveTerminal reads the state of r when it is a terminal, and returns nil
// when it is not.
func saveTerminal(r io.Reader) (*terminalState, error) {
	f, ok := r.(*os.File)
	if !ok {
		return nil, nil
	}
	var st *terminalState
	err := control(f, func(fd int) error {
		tio, err := unix.IoctlGetTermios(fd, getTermios)
		if err != nil {
			// Not a terminal: nothing the command can leave behind
			// outlives the open file description it was given.
			return nil
		}
		ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		if err != nil {
			return fmt.Errorf("read window size: %w", err)
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return fmt.Errorf("read file status flags: %w", err)
		}
		excl, err := exclusive(fd)
		if err != nil {
			return fmt.Errorf("read exclusive mode: %w", err)
		}
		st = &terminalState{f: f, termios: *tio, winsize: *ws, flags: flags, exclusive: excl}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("save the terminal's modes on standard input: %w", err)
	}
	return st, nil
}

// restore puts back what the command changed. It sets only what differs,
// where that can be read: from a background process group, setting termios
// stops jail-mcp with SIGTTOU, which then happens only when there is
// something to put back, and job control lets the user bring it forward.
func (st *terminalState) restore() error {
	if st == nil {
		return nil
	}
	err := control(st.f, func(fd int) error {
		var errs []error
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || flags != st.flags {
			// O_NONBLOCK left on the shared open file description makes
			// reads fail with EAGAIN for every program run after jail-mcp.
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, st.flags); err != nil {
				errs = append(errs, fmt.Errorf("file status flags: %w", err))
			}
		}
		// In exclusive mode no one but root can open the terminal again:
		// no sudo or ssh password prompt, no less reading keys from it.
		if err := restoreExclusive(fd, st.exclusive); err != nil {
			errs = append(errs, fmt.Errorf("exclusive mode: %w", err))
		}
		if tio, err := unix.IoctlGetTermios(fd, getTermios); err != nil || *tio != st.termios {
			// Now, not after output drains (TCSADRAIN): output the command
			// stopped (tcflow TCOOFF) never drains, and jail-mcp must not
			// hang on it.
			if err := unix.IoctlSetTermios(fd, setTermios, &st.termios); err != nil {
				errs = append(errs, fmt.Errorf("termios: %w", err))
			}
		}
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err != nil || *ws != st.winsize {
			// Unchanged, it is not set: a resize signals the foreground
			// process group. A window the user resized while the command
			// ran is put back too; the next resize corrects it.
			if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &st.winsize); err != nil {
				errs = append(errs, fmt.Errorf("window size: %w", err))
			}
		}
		if foreground(fd) {
			// Whether the command stopped output (tcflow TCOOFF) cannot be
			// read; restarting it when it was not stopped does nothing.
			// From the background it would stop jail-mcp instead.
			if err := startOutput(fd); err != nil {
				errs = append(errs, fmt.Errorf("restart output: %w", err))
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("restore the terminal's modes on standard input: %w", err)
	}
	return nil
}

// IsTerminal reports whether r is a terminal.
func IsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	is := false
	control(f, func(fd int) error {
		_, err := unix.IoctlGetTermios(fd, getTermios)
		is = err == nil
		return nil
	})
	return is
}

// foreground reports whether jail-mcp may change fd's terminal without
// being stopped: it is in the terminal's foreground process group, or the
// terminal is not its controlling terminal at all.
func foreground(fd int) bool {
	pgrp, err := foregroundGroup(fd)
	return err != nil || pgrp == unix.Getpgrp()
}

// control calls fn with f's descriptor; unlike f.Fd, it leaves the
// descriptor's blocking mode alone, which is part of what is saved.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
