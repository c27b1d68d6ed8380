package jailfs

import "fmt"

// Holder is a process that holds a jail's lock.
type Holder struct {
	PID     int    `json:"pid"`
	Command string `json:"command"` // its command line, shown safely; "" when unknown
}

func (h Holder) String() string {
	if h.Command == "" {
		return fmt.Sprintf("pid %d", h.PID)
	}
	return fmt.Sprintf("pid %d: %s", h.PID, h.Command)
}
