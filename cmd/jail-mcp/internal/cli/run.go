package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/lmittmann/tint"

	"github.com/jail-mcp/jail-mcp/session/view"
)

// Serve is the MCP server, "jail-mcp [serve]": set by package main, the
// only one that links the MCP SDK, so that every other sub-command runs
// without it (see early.go).
var Serve func(ctx context.Context, args, environ []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error

// version is set at build time with -ldflags "-X github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli.version=v1.2.3";
// otherwise the module version from the build info is used.
var version = ""

// Version is the release, or the module version Go stamped from the
// checkout (v0.0.0-<time>-<commit>), or devel+<commit> when only the
// commit is known, or (devel).
func Version() string {
	v, rev, _ := buildVersion()
	switch {
	case v != "":
		return v
	case rev != "":
		return "devel+" + rev[:min(12, len(rev))]
	}
	return "(devel)"
}

// buildVersion reads the version and the VCS commit from the build info.
func buildVersion() (v, rev string, modified bool) {
	v = version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v, "", false
	}
	if v == "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return v, rev, modified
}

// versionLine is what "jail-mcp version" prints.
func versionLine() string {
	line := fmt.Sprintf("jail-mcp %s %s %s/%s", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if _, rev, modified := buildVersion(); rev != "" {
		line += " commit " + rev
		if modified {
			line += " (modified)"
		}
	}
	return line + "\n"
}

// exitError carries the exit status of a sub-command; msg, when set, is
// printed as one line on stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// IsUsage reports whether err is a bad invocation or configuration.
func IsUsage(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.code == 2 && ee.msg != ""
}

// ExitStatus is an error that ends the program with code, saying nothing.
func ExitStatus(code int) error { return &exitError{code: code} }

// UsageError is a bad invocation or configuration: exit status 2.
func UsageError(format string, a ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, a...)}
}

func ExitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(stderr, "jail-mcp: %s\n", oneLine(ee.msg))
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "jail-mcp: %s\n", oneLine(err.Error()))
	return 1
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

const usageText = `jail-mcp runs shell commands for AI assistants in a write-jail.

Usage:
  jail-mcp [serve] [flags]           MCP server on stdin/stdout (the default)
  jail-mcp run [flags] -- CMD [ARG]  run one command in the jail; exits with its status
  jail-mcp doctor [--json]           which backends confine here, and how to enable them
  jail-mcp diff [--session NAME]     a session's project changes not yet applied (no NAME: who has any)
  jail-mcp apply --session NAME [PATH...]
                                     write them to the project (--dry-run: only say what would be)
  jail-mcp discard --session NAME [PATH...]
                                     drop them: commands see the host's files there again
  jail-mcp prune [--remove]          list the project's jails and their last use; remove old ones
  jail-mcp version                   version, Go version, OS/arch, and the commit built
  jail-mcp help                      this text

Run "jail-mcp serve -h" or "jail-mcp run -h" for the flags.
`

// Main is the whole program: args without the program name, the
// environment as KEY=VALUE, and the standard streams.
func Main(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	env := view.EnvMap(environ)
	getenv := func(k string) string { return env[k] }
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		if Serve == nil {
			return errors.New("serve: this build has no MCP server")
		}
		return Serve(ctx, args, environ, getenv, stdin, stdout, stderr)
	case "run":
		return runCommand(ctx, args, environ, getenv, stdin, stdout, stderr)
	case "prune":
		return prune(args, getenv, stdout, stderr)
	case "diff", "apply", "discard":
		return review(cmd, args, environ, getenv, stdout, stderr)
	case "doctor":
		return doctor(ctx, args, getenv, stdout, stderr)
	case "version":
		if len(args) > 0 {
			return UsageError("version takes no arguments")
		}
		fmt.Fprint(stdout, versionLine())
		return nil
	case "help":
		fmt.Fprint(stdout, usageText)
		return nil
	}
	return UsageError("unknown sub-command %q (want serve, run, diff, apply, discard, doctor, prune or version)", cmd)
}

// NewFlagSet returns a flag set that prints nothing itself: errors become
// one line from exitCode, and parseFlags prints help to stdout.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// ParseFlags parses args; -h prints the flags to stdout and ends with
// status 0.
func ParseFlags(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		if fs.Name() == "serve" {
			// jail-mcp -h: the sub-commands first.
			fmt.Fprint(stdout, usageText+"\n")
		}
		fmt.Fprintf(stdout, "Usage: %s\n\nFlags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return &exitError{code: 0}
	}
	if err != nil {
		return UsageError("%s: %v", fs.Name(), err)
	}
	return nil
}

func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(tint.NewTextHandler(w, &tint.Options{Level: level, NoColor: !isTerminal(w)}))
}
