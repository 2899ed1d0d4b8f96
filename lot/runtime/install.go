package runtime

import (
	"context"
	"strings"

	"gantry/lot/defs"
	"gantry/lot/schedule"
	"gantry/lot/syntax"
)

// sysPrefix is where each kind's deployed source is published, retained.
var sysPrefix = map[defs.Kind]string{
	defs.Action:    "$SYS/Coreflux/Actions/",
	defs.Model:     "$SYS/Coreflux/Models/",
	defs.Rule:      "$SYS/Coreflux/Rules/",
	defs.Connector: "$SYS/Coreflux/Connectors/",
}

// onApplied is the store's watch callback: it runs on the applying
// goroutine, in change order, before Apply returns.
func (e *Engine) onApplied(a defs.Applied) {
	e.install(e.o.Store.List(""), a.Events)
}

// install builds the deployment of list and switches to it; events say
// what changed (nil at start: everything is new). A list that no longer
// builds (it was checked before it was stored, so only a newer build's
// stricter checks can cause this) keeps the previous deployment.
func (e *Engine) install(list []defs.Definition, events []defs.Event) {
	d, err := build(list, e.o.Interp)
	if err != nil {
		e.log.Error("stored LoT definitions do not build; keeping the previous ones", "err", err)
		return
	}
	e.dep.Store(d)
	e.rules.Swap(d.rules)
	e.reschedule(d)
	if events == nil {
		for _, def := range list {
			e.publishSys(sysPrefix[def.Kind]+def.Name, []byte(def.Source))
		}
		e.runStart(d, nil)
		return
	}
	for _, ev := range events {
		if ev.Op == defs.Removed {
			e.publishSys(sysPrefix[ev.Kind]+ev.Name, nil)
			e.publishSys(errorTopic(ev.Name), nil)
		} else if ev.Op != defs.Unchanged {
			e.publishSys(sysPrefix[ev.Kind]+ev.Name, []byte(ev.Source))
		}
	}
	e.runStart(d, events)
}

// reschedule makes the timers match the deployment: a timer whose
// schedule is unchanged keeps its phase (schedule.Set keeps it).
func (e *Engine) reschedule(d *deployment) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name := range e.timers {
		if a := d.actions[name]; a == nil || a.timer == nil {
			e.sched.Remove(name)
			delete(e.timers, name)
		}
	}
	for name, a := range d.actions {
		if a.timer == nil {
			continue
		}
		if err := e.sched.Set(name, *a.timer, e.timerFunc(name)); err != nil {
			e.log.Error("cannot schedule an action", "action", name, "err", err)
			continue
		}
		e.timers[name] = a.timer.String()
	}
}

// timerFunc runs the current version of the action name.
func (e *Engine) timerFunc(name string) schedule.Func {
	return func(ctx context.Context, t schedule.Tick) {
		if a := e.dep.Load().actions[name]; a != nil {
			e.runAction(a, nil, 0)
		}
	}
}

// runStart runs the ON START actions that are new or changed (all of them
// when events is nil, at start).
func (e *Engine) runStart(d *deployment, events []defs.Event) {
	for name, a := range d.actions {
		if a.def.Trigger == nil || a.def.Trigger.Kind != syntax.TriggerStart {
			continue
		}
		if events != nil && !changedAction(events, name) {
			continue
		}
		e.runAction(a, nil, 0)
	}
}

func changedAction(events []defs.Event, name string) bool {
	for _, ev := range events {
		if ev.Kind == defs.Action && strings.EqualFold(ev.Name, name) && (ev.Op == defs.Added || ev.Op == defs.Replaced) {
			return true
		}
	}
	return false
}
