package session

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// A session's commands run in session agents (where the backend has them,
// jail.Backend.Agents): one per policy that cannot change in a running
// sandbox, the network (on, off, or an allowlist) and the set of CLIs
// whose credentials are shown. The default policy's agent starts when the
// session opens (Warm), any other on the first call that needs it; each stays until
// the session is reset or ends, it is idle for agentIdle, or more policies
// are in use than maxAgents; one that ended (killed, crashed, or taken
// down by the server for breaking the protocol) is started again by the
// next call, whose result says so.
const (
	maxAgents = 4
	agentIdle = 10 * time.Minute
)

// agentKey is the policy of an agent.
type agentKey struct {
	network string // on, off, or allow:LIST
	auth    string // the CLIs shown, sorted, comma-separated
}

func (k agentKey) String() string {
	return fmt.Sprintf("network %s, credentials of [%s]", k.network, k.auth)
}

// networkMode is a call's network as --network writes it.
func (p callPlan) networkMode() string {
	switch {
	case !p.network:
		return "off"
	case p.allow != nil:
		return egress.Prefix + p.allow.String()
	}
	return "on"
}

// agentSlot is the agent of one policy of a session.
type agentSlot struct {
	key      agentKey
	runner   jail.Runner
	cc       *limits.Group // its cgroups, or nil
	perCall  bool          // each call gets cgroups of its own in cc
	egress   *agentEgress  // the proxy of its allowlist, or nil
	started  time.Time
	lastUsed time.Time
	running  int
	restarts int
	ended    string // why the previous agent of this policy ended
	// gen, under bubblewrap's own view (jail.NativeOverlay), is the
	// number of the project's state its sandbox was started at: its view
	// lasts as long as it does (0: a watch that was blind).
	gen uint64
	// foreign counts the calls of the session's other agents that changed
	// its layer since this one started (agentDone): its views, mounted
	// over the same layer, would not see those changes (a file another
	// copied up still shows the host's, and a write to it fails: two
	// mounts over one upper directory). It adds to the number of the
	// state a call of this agent must see (viewGen).
	foreign uint64
}

// AgentInfo describes one session agent for jail_status.
type AgentInfo struct {
	Network  string   `json:"network"` // on, off, or allow:LIST
	Auth     []string `json:"auth"`
	Running  int      `json:"running"`
	Started  string   `json:"started"`
	Restarts int      `json:"restarts"`
	Ended    string   `json:"last_ended"`
}

// Agents lists the session's agents.
func (s *Session) Agents() []AgentInfo {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	out := []AgentInfo{}
	for _, a := range s.agents {
		names := []string{}
		if a.key.auth != "" {
			names = strings.Split(a.key.auth, ",")
		}
		out = append(out, AgentInfo{
			Network: a.key.network, Auth: names, Running: a.running,
			Started: a.started.UTC().Format(time.RFC3339), Restarts: a.restarts, Ended: a.ended,
		})
	}
	slices.SortFunc(out, func(a, b AgentInfo) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// agentUse is a call's use of a session agent (agent): the agent; why
// the one before it ended, when the call started a new one (restarted);
// the number of the project's state the call must see there (gen:
// jail.Call.ViewGen, with the changes the session's other agents made in
// its layer since it started: foreign); and, under bubblewrap's own view,
// when the agent's view was made, when it shows an older state of the
// project than the call's and calls still run in it (behind, a job): no
// second view over the session's layer is made beside it, and the next
// call after them gets a new agent.
type agentUse struct {
	slot      *agentSlot
	restarted string
	gen       uint64
	behind    time.Time
}

// agent returns the running agent of the call's policy (its network, the
// CLIs of exps), starting one when there is none or the one before ended;
// it counts a call on it, which agentDone uncounts.
func (s *Session) agent(p callPlan, exps []auth.Exposure) (use agentUse, err error) {
	key := agentKey{network: p.networkMode(), auth: strings.Join(slices.Sorted(slices.Values(p.auth)), ",")}
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	now := time.Now()
	s.retireAgents(now, key)
	slot := s.agents[key]
	// Read before a sandbox starts: a change while it starts numbers a
	// later state, which the next call finds newer.
	gen := s.m.view.Gen()
	if slot != nil && slot.runner.Err() == nil {
		stale := s.staleView(slot, gen)
		if !stale || slot.running > 0 {
			// A view older than the project's state while calls run in
			// it: a second one, mounted over the session's layer beside
			// it, would not see what they write there (two mounts over
			// one upper directory, which the kernel leaves undefined).
			use = agentUse{slot: slot, gen: viewGen(slot, gen)}
			if stale {
				use.behind = slot.started
			}
			slot.lastUsed = now
			slot.running++
			return use, nil
		}
	}
	next := &agentSlot{key: key, started: now, lastUsed: now, gen: gen}
	if slot != nil && slot.runner.Err() == nil {
		// Its view shows an older state of the project, and no call runs
		// in it: a new agent, with a new view.
		next.restarts, next.ended = slot.restarts, slot.ended
		s.m.log.Debug("session agent's view is older than the project: starting a new one", "session", s.Name, "policy", key.String())
		s.stopAgent(slot)
		delete(s.agents, key)
	} else if slot != nil {
		next.restarts = slot.restarts + 1
		next.ended = slot.runner.Err().Error()
		use.restarted = next.ended
		s.m.log.Warn("session agent ended: starting a new one", "session", s.Name, "policy", key.String(), "why", next.ended)
		s.stopAgent(slot)
	}
	var runner jail.Runner
	var cc *limits.Group
	if p.allow != nil {
		next.egress = s.newEgress(*p.allow)
	}
	runner, cc, next.perCall, err = s.startAgent(p.network, next.egress, exps)
	if err != nil {
		if next.egress != nil {
			next.egress.close()
		}
		if slot != nil {
			delete(s.agents, key)
		}
		return agentUse{}, err
	}
	next.runner, next.cc, next.running = runner, cc, 1
	s.agents[key] = next
	s.m.log.Debug("session agent started", "session", s.Name, "policy", key.String())
	use.slot, use.gen = next, gen
	return use, nil
}

// staleView reports whether slot's agent shows the project by bubblewrap's
// own view (jail.NativeOverlay), made at a state before gen (or by a blind
// watch, or for one: gen 0): such a view never sees what the host renamed
// or removed since, so the agent is replaced (agent).
func (s *Session) staleView(slot *agentSlot, gen uint64) bool {
	if !s.m.cfg.Overlay || !jail.NativeOverlay(s.m.cfg.Backend) {
		return false
	}
	return gen == 0 || slot.gen != gen || slot.foreign > 0
}

// viewGen is the number of the project's state that a call numbered gen
// (view.Gen) must see in slot's agent: the host's, plus the changes the
// session's other agents made in its layer since slot's started
// (foreign); 0 stays 0 (a blind watch: a view per call). Callers hold
// agentMu.
func viewGen(slot *agentSlot, gen uint64) uint64 {
	if gen == 0 {
		return 0
	}
	return gen + slot.foreign
}

// freshenEvery is the shortest time between two agents a session readies
// ahead of its calls after changes of the project: a host that renames
// files without a pause (a build, an editor's saves) once had an idle
// session start one after the other (37 in 4 s of a rename every 100 ms),
// a processor's worth. A call that comes meanwhile replaces a stale agent
// itself (staleView).
const freshenEvery = time.Second

// freshen readies, on a change of the project under bubblewrap's own
// view, a new agent of the session's default policy ahead of its next
// call (Warm replaces a stale one); changes while it starts one make it
// start one more, never two at a time. Other policies' agents are
// replaced by their next call.
func (s *Session) freshen() {
	s.freshenAgain.Store(true)
	if !s.freshening.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for s.freshenAgain.Swap(false) {
			if wait := time.Until(time.Unix(0, s.lastFreshen.Load()).Add(freshenEvery)); wait > 0 {
				time.Sleep(wait)
				// One new agent for every change so far.
				s.freshenAgain.Store(false)
			}
			s.Warm()
			s.lastFreshen.Store(time.Now().UnixNano())
		}
		s.freshening.Store(false)
		if s.freshenAgain.Load() {
			s.freshen() // a change came as it stopped
		}
	}()
}

// agentDone uncounts a call of slot; moved: the call changed the
// session's layer, which the session's other agents' views do not see
// (two mounts over one upper directory): each readies a view that does
// before its next call (under bubblewrap's own view, the next call gets
// a new agent: staleView).
func (s *Session) agentDone(slot *agentSlot, moved bool) {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	slot.running--
	slot.lastUsed = time.Now()
	gen := s.m.view.Gen()
	if moved {
		for _, a := range s.agents {
			if a == slot {
				continue
			}
			a.foreign++
			if r, ok := a.runner.(view.Renewer); ok && gen != 0 {
				r.RenewView(viewGen(a, gen))
			}
		}
	}
	if slot.running == 0 && s.agents[slot.key] == slot && s.staleView(slot, gen) {
		// The last call in a view the project moved on from: the session
		// is idle, a new agent now.
		s.freshen()
	}
}

// startAgent starts the agent of a policy: a sandbox of the session's
// jail, by descriptor, and under bwrap the credentials of the policy
// bound in it; from a launcher thread already in cgroups of its own where
// the server makes cgroups.
func (s *Session) startAgent(network bool, eg *agentEgress, exps []auth.Exposure) (r jail.Runner, cc *limits.Group, perCall bool, err error) {
	spec := s.sandboxSpec(s.Path, network, exps)
	spec.CallPath = view.EnvOf(view.CallEnv(s.m.hostEnv(), s.Path, nil, nil), "PATH")
	if eg != nil {
		spec.Egress = &jail.Egress{Serve: eg.serve}
	}
	opened, err := s.sandboxFiles(&spec, exps)
	defer func() { closeAll(opened) }()
	if err != nil {
		return nil, nil, false, err
	}
	var launch jail.Launcher
	if l := s.m.pool.Take(); l != nil {
		cc, launch = l.Group(), l.Launch
		spec.Place = s.m.pool.AgentPlacer(cc)
	}
	if r, err = s.m.cfg.Backend.Runner(spec, launch); err != nil {
		if cc != nil {
			s.m.pool.Remove(cc)
		}
		return nil, nil, false, err
	}
	return r, cc, spec.Place != nil, nil
}

// retireAgents stops the agents idle for agentIdle, and the least recently
// used idle one when a new policy would make more than maxAgents.
// s.agentMu is held.
func (s *Session) retireAgents(now time.Time, want agentKey) {
	for k, a := range s.agents {
		if a.running == 0 && now.Sub(a.lastUsed) > agentIdle {
			s.stopAgent(a)
			delete(s.agents, k)
		}
	}
	if _, ok := s.agents[want]; ok || len(s.agents) < maxAgents {
		return
	}
	var oldest *agentSlot
	for _, a := range s.agents {
		if a.running == 0 && (oldest == nil || a.lastUsed.Before(oldest.lastUsed)) {
			oldest = a
		}
	}
	if oldest != nil {
		s.stopAgent(oldest)
		delete(s.agents, oldest.key)
	}
}

// stopAgent ends an agent and, once its processes are gone, its cgroups.
func (s *Session) stopAgent(a *agentSlot) {
	a.runner.Close()
	if a.egress != nil {
		a.egress.close()
	}
	if a.cc != nil {
		s.m.pool.Remove(a.cc)
		a.cc = nil
	}
}

// stopAgents ends every agent of the session: at a reset and at its end.
func (s *Session) stopAgents() {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	for k, a := range s.agents {
		s.stopAgent(a)
		delete(s.agents, k)
	}
}

// Warm starts the session agent of the default policy (the operator's
// network and credentials) unless it runs already, so that the session's
// first call finds it warm, and under landlock its credentials placed. A
// call that comes meanwhile waits for this start and never makes a second
// (agent holds agentMu while it starts one). Nothing happens without agents, when the jail is over a bound
// (the first call says why), or once the session is closed.
func (s *Session) Warm() {
	if !s.m.cfg.Backend.Agents() {
		return
	}
	p, err := s.plan(Request{Command: "true"})
	if err != nil {
		return
	}
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	if s.admit() != nil { // closed, or over a bound
		return
	}
	s.ensureSkeleton()
	exps := s.m.creds.Exposures(p.auth)
	use, err := s.agent(p, exps)
	if err != nil {
		s.m.log.Debug("session agent not started ahead of the first call", "session", s.Name, "err", err)
		return
	}
	s.agentDone(use.slot, false)
	// Credential links stay between calls: placed now, the first call
	// finds them in place.
	if s.m.cfg.Backend.Credentials() == jail.LinkCredentials {
		if undo, err := s.creds.Place(exps, true); err == nil {
			undo()
		}
	}
}
