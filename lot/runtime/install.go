package runtime

import (
	"context"
	"slices"

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
// what changed (nil at start: everything is new). Definitions are checked
// before they are stored, so one that does not build was stored by a
// version with other checks (or, in a cluster, committed by a peer): it is
// left out, with what depends on it, logged, and its $SYS topics cleared;
// it comes back when a change makes it build again. Only a set that fails
// as a whole keeps the previous deployment.
func (e *Engine) install(list []defs.Definition, events []defs.Event) {
	d, dropped := buildLenient(list, e.o.Interp)
	if d == nil {
		e.log.Error("stored LoT definitions do not build; keeping the previous ones", "err", dropped[len(dropped)-1].err)
		return
	}
	broken := map[defKey]error{}
	for _, f := range dropped {
		broken[f.key] = f.err
		e.log.Error("stored LoT definition does not build; it does not run", "kind", f.key.kind, "name", f.key.name, "err", f.err)
	}
	e.dep.Store(d)
	e.rules.Swap(d.rules)
	e.publishRuleCount(d.rules)
	e.o.Broker.ReauthorizeSubscriptions() // a narrower or wider rule changes what subscriptions read
	e.watch(append(slices.Clone(e.o.Watch), d.watch...))
	e.reschedule(d)
	e.mu.Lock()
	wasBroken := e.broken
	e.broken = broken
	e.mu.Unlock()
	e.publishChanges(d, list, events, broken, wasBroken)
	e.deployConnectors(d)
	e.runStart(d, func(name string) bool {
		k := defKey{defs.Action, name}
		return events == nil || changedAction(events, name) || (wasBroken[k] != nil && broken[k] == nil)
	})
}

// publishChanges keeps the $SYS topics in step with a new deployment:
// sources of new and changed definitions, of those that build again, and
// none for removed ones and those that no longer build.
func (e *Engine) publishChanges(d *deployment, list []defs.Definition, events []defs.Event, broken, wasBroken map[defKey]error) {
	for _, def := range list {
		k := defKey{def.Kind, def.Name}
		switch {
		case broken[k] != nil && (events == nil || wasBroken[k] == nil):
			e.unpublishSource(def.Kind, def.Name) // it no longer runs
		case broken[k] == nil && (events == nil || wasBroken[k] != nil):
			e.publishSource(d, def.Kind, def.Name, def.Source) // at start, or it builds again
		}
	}
	for _, ev := range events {
		k := defKey{ev.Kind, ev.Name}
		switch {
		case ev.Op == defs.Removed:
			e.unpublishSource(ev.Kind, ev.Name)
		case broken[k] != nil || wasBroken[k] != nil:
			// done above
		case ev.Op == defs.Added || ev.Op == defs.Replaced:
			e.publishSource(d, ev.Kind, ev.Name, ev.Source)
		}
	}
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
// action's or model's error.
func (e *Engine) unpublishSource(kind defs.Kind, name string) {
	e.publishSys(sysPrefix[kind]+name, nil)
	switch kind {
	case defs.Connector:
		e.publishSys(routesPrefix+name, nil)
	case defs.Action, defs.Model:
		key := errorKey(kind, name)
		e.mu.Lock()
		described, errored := kind == defs.Action && e.described[name], e.errored[key]
		if kind == defs.Action {
			delete(e.described, name)
		}
		delete(e.errored, key)
		if errored != nil && errored.published {
			e.errorsShown.Add(-1)
		}
		e.mu.Unlock()
		if described {
			e.publishSys(descriptionTopic(name), nil)
		}
		if errored != nil && errored.published {
			e.publishSys(errorTopicOf(kind, name), nil)
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
		if p := e.o.Placement; p != nil && !p.RunsHere(WorkTimer+name) {
			return // another node owns it (or this one is cut off)
		}
		if a := e.dep.Load().actions[name]; a != nil {
			e.runAction(a, nil, 0)
		}
	}
}

// runStart runs the ON START actions that start now: new or changed
// ones, all of them at start (LOT.md, Gantry's decisions: ON START runs
// when the definition starts).
func (e *Engine) runStart(d *deployment, starts func(name string) bool) {
	if e.o.Placement != nil {
		return // the placement runs them on their owner (RunStart)
	}
	for _, def := range d.defs { // in the store's order, by name
		a := d.actions[def.Name]
		if def.Kind == defs.Action && a != nil && a.def.Trigger != nil && a.def.Trigger.Kind == syntax.TriggerStart &&
			starts(def.Name) {
			e.runAction(a, nil, 0)
		}
	}
}

func changedAction(events []defs.Event, name string) bool {
	for _, ev := range events {
		if ev.Kind == defs.Action && ev.Name == name && (ev.Op == defs.Added || ev.Op == defs.Replaced) {
			return true
		}
	}
	return false
}

// deployConnectors hands the connectors that build to Options.Connectors.
func (e *Engine) deployConnectors(d *deployment) {
	if e.o.Connectors == nil {
		return
	}
	var list []DeployedConnector
	for _, def := range d.defs {
		if c, ok := d.parsed[defKey{def.Kind, def.Name}].(*syntax.Connector); ok {
			list = append(list, DeployedConnector{Name: def.Name, Source: def.Source, Def: c})
		}
	}
	e.o.Connectors.Deploy(list, e.env)
}
