package runtime

import (
	"crypto/sha256"
	"encoding/hex"

	"gantry/lot/defs"
	"gantry/lot/syntax"
)

// Placement says where the work that runs in one place runs: in a
// cluster, timers and ON START actions run on their owner only (the
// cluster's owner map). Nil, the default, runs everything here.
type Placement interface {
	// RunsHere reports whether the work key (WorkKey) runs on this node
	// now. It is asked at every tick of a timer, and must answer without
	// I/O.
	RunsHere(key string) bool
}

// Work keys of the work that runs in one place.
const (
	WorkTimer = "timer/" // WorkTimer + action: an ON EVERY / AT / TIMESTAMP timer
	WorkStart = "start/" // WorkStart + action: an ON START action
)

// WorkItem is one piece of deployed work that runs in one place.
type WorkItem struct {
	Key  string // WorkTimer or WorkStart, then the action's name
	Code string // for an ON START action: a hash of its source (StartCode)
}

// Work lists the deployed timers and ON START actions, in deployment
// order.
func (e *Engine) Work() []WorkItem {
	d := e.dep.Load()
	var out []WorkItem
	for _, def := range d.defs {
		a := d.actions[def.Name]
		if def.Kind != defs.Action || a == nil {
			continue
		}
		switch {
		case a.timer != nil:
			out = append(out, WorkItem{Key: WorkTimer + a.name})
		case isStart(a):
			out = append(out, WorkItem{Key: WorkStart + a.name, Code: StartCode(a.source)})
		}
	}
	return out
}

// StartCode is the code version of an ON START action: it runs again
// when the code changes.
func StartCode(source string) string {
	h := sha256.Sum256([]byte(source))
	return hex.EncodeToString(h[:12])
}

func isStart(a *action) bool {
	return a.def.Trigger != nil && a.def.Trigger.Kind == syntax.TriggerStart
}

// RunStart runs the deployed ON START action name now, if its code is
// still code; it reports whether it ran. With a Placement, the engine
// runs no ON START action itself: the placement calls this on the
// action's owner.
func (e *Engine) RunStart(name, code string) bool {
	a := e.dep.Load().actions[name]
	if a == nil || !isStart(a) || StartCode(a.source) != code {
		return false
	}
	e.runAction(a, nil, 0)
	return true
}
