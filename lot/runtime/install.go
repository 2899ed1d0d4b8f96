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

// routesPrefix mirrors $SYS/Coreflux/Connectors/ under the older name of
// connectors (LOT.md, Gantry's decisions: the topics mirror each other).
const routesPrefix = "$SYS/Coreflux/Routes/"

// descriptionTopic holds an action's DESCRIPTION, retained.
func descriptionTopic(action string) string {
	return "$SYS/Coreflux/Actions/" + action + "/Description"
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
			e.publishSource(d, def.Kind, def.Name, def.Source)
		}
	}
	for _, ev := range events {
		switch ev.Op {
		case defs.Removed:
			e.unpublishSource(ev.Kind, ev.Name)
		case defs.Added, defs.Replaced:
			e.publishSource(d, ev.Kind, ev.Name, ev.Source)
		}
	}
	e.runStart(d, events)
}

// publishSource publishes a deployed definition's source, and an action's
// DESCRIPTION, retained under $SYS/Coreflux.
func (e *Engine) publishSource(d *deployment, kind defs.Kind, name, source string) {
	e.publishSys(sysPrefix[kind]+name, []byte(source))
	switch kind {
	case defs.Connector:
		e.publishSys(routesPrefix+name, []byte(source))
	case defs.Action:
		desc := ""
		if a := d.actions[name]; a != nil && a.def.Description != nil {
			desc = a.def.Description.Value
		}
		e.mu.Lock()
		had := e.described[name]
		if desc != "" {
			e.described[name] = true
		} else {
			delete(e.described, name)
		}
		e.mu.Unlock()
		if desc != "" || had {
			e.publishSys(descriptionTopic(name), []byte(desc))
		}
	}
}

// unpublishSource clears what publishSource published, and a removed
// action's error.
func (e *Engine) unpublishSource(kind defs.Kind, name string) {
	e.publishSys(sysPrefix[kind]+name, nil)
	switch kind {
	case defs.Connector:
		e.publishSys(routesPrefix+name, nil)
	case defs.Action:
		e.mu.Lock()
		described, errored := e.described[name], e.errored[name]
		delete(e.described, name)
		delete(e.errored, name)
		e.mu.Unlock()
		if described {
			e.publishSys(descriptionTopic(name), nil)
		}
		if errored != nil && errored.published {
			e.publishSys(errorTopic(name), nil)
		}
	}
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
