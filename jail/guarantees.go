package jail

// Promise is one numbered promise of docs/security.md.
type Promise struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	Note string `json:"note,omitempty"` // why it is not kept, or how it is kept
}

// Guarantees splits the promises into those a backend keeps and those it
// does not; both lists are always present.
type Guarantees struct {
	Kept    []Promise `json:"kept"`
	NotKept []Promise `json:"not_kept"`
}

// fifoReadGap is the read side of host FIFOs, a known gap of every
// backend: neither Landlock's read right nor a read-only mount tells a
// FIFO from a file, seccomp cannot see what a path names, and opening a
// FIFO is the only act that reveals it (no rule sees its type before the
// open without a race). Only where a call reads nothing of the host is a
// FIFO out of reach.
const fifoReadGap = "a host FIFO opened for reading anywhere a call reads, not only in the project or HOME (everywhere but the --deny-read list, other sessions' jails, /tmp, /var/tmp and /run), and as root any FIFO, whatever its owner and mode: a reader in the jail takes what a host process writes into it (neither Landlock nor a read-only mount tells a FIFO from a file)"

// promises are the numbered promises of docs/security.md, by ID.
var promises = map[int]string{
	1: "no write to the host outside the session's jail",
	2: "no write-equivalent channel to the host",
	3: "nothing outlives its call unless asked to (a job), nor its session",
	4: "the server is never a confused deputy",
	5: "root is not special",
	6: "secrets stay out unless asked for",
	7: "bounded",
	8: "fail closed",
	9: "sessions are apart",
}

// DescribeUnread says how backend b hides what no command reads (the
// --deny-read list, Spec.Unread) and other sessions' jails, and what it
// cannot hide.
func DescribeUnread(b Backend) (how string, gaps []string) {
	if d, ok := b.(interface{ unreadHow() (string, []string) }); ok {
		return d.unreadHow()
	}
	return "not hidden: commands do not run confined", []string{"every file the server's user can read"}
}

// guarantees builds a Guarantees from the notes of the promises not kept
// (why not); every other promise is kept, with its note in how (how it is
// kept), if any.
func guarantees(notKept, how map[int]string) Guarantees {
	g := Guarantees{Kept: []Promise{}, NotKept: []Promise{}}
	for id := 1; id <= len(promises); id++ {
		if note, ok := notKept[id]; ok {
			g.NotKept = append(g.NotKept, Promise{ID: id, Name: promises[id], Note: note})
			continue
		}
		g.Kept = append(g.Kept, Promise{ID: id, Name: promises[id], Note: how[id]})
	}
	return g
}
