package limits

// LeftoverCgroups are the cgroups beside this process's own that servers
// killed before they could clean up left, which its servers may not
// remove (another user's): they stay until a server of their owner's
// starts here, or an administrator removes them. They cost a start
// nothing.
type LeftoverCgroups struct {
	Count  int      `json:"count"`
	Owners []string `json:"owners"` // user names, or uid N
	Dirs   []string `json:"dirs"`
}
