package cli

import (
	"errors"
	"fmt"

	"github.com/jail-mcp/jail-mcp/jail"
)

// ViewChoice is what --overlay came to at start: whether commands see the
// project view, why, and what would turn it on where it is off.
type ViewChoice struct {
	Mode   string // --overlay as given: auto, on or off
	On     bool
	Reason string // why it is on or off
	Hint   string // what would turn it on; "" when on, or off by choice
}

// chooseView decides the project view for --overlay mode on backend (its
// name), probe saying whether a view mounts and takes a write there (nil)
// or why not. on fails closed: a view that cannot run is an error, never
// a read-only project. auto falls back to off with the reason. off never
// probes.
func chooseView(mode, backend string, probe func() error) (ViewChoice, error) {
	c := ViewChoice{Mode: mode}
	if mode == "off" {
		c.Reason = "--overlay off: the project is read-only to commands"
		return c, nil
	}
	if err := probe(); err != nil {
		if mode == "on" {
			return c, fmt.Errorf("--overlay on: %w", err)
		}
		c.Reason = "--overlay auto: the project view cannot run here, the project is read-only to commands: " + err.Error()
		c.Hint = viewHint(backend, err)
		return c, nil
	}
	c.On = true
	c.Reason = "--overlay " + mode + ": " + backend + " mounts the project view here"
	return c, nil
}

// viewHint is what would let the project view run where err says it
// cannot, on backend.
func viewHint(backend string, err error) string {
	switch {
	case errors.Is(err, jail.ErrNestedUserns):
		return "install bubblewrap 0.9 or later, which mounts the view itself with no user namespace of the sandbox's; or let bubblewrap's sandbox create a user namespace: on Ubuntu, whose AppArmor profile for bwrap (bwrap-userns-restrict) denies them to bwrap's children, " +
			"give bwrap a profile that allows userns without that restriction (docs/configuration.md, where the view is off); or run with --overlay off to silence this"
	case backend == "landlock" || backend == "sandbox-exec":
		return "install bubblewrap (sudo apt-get install bubblewrap) and use --backend bwrap or auto: only bubblewrap's sandbox can mount the view"
	case errors.Is(err, jail.ErrNoOverlay):
		return "run jail-mcp doctor for what confines here; the view needs bubblewrap and Linux 5.11 or later"
	}
	return "run jail-mcp doctor --overlay on for the whole reason"
}

// String is the decision in one line.
func (c ViewChoice) String() string {
	s := "off"
	if c.On {
		s = "on"
	}
	s = "project view " + s + ": " + c.Reason
	if c.Hint != "" {
		s += "; to enable: " + c.Hint
	}
	return s
}
