package rules

import (
	"fmt"
	"strings"
)

// Scope is what a rule governs (LOT.md §6.2): a kind of MQTT access or a
// family of management commands.
type Scope uint8

// Scopes. The zero value is invalid so that a forgotten field is caught by
// Compile.
const (
	Connect Scope = iota + 1
	Publish
	Subscribe
	PublishSys
	SubscribeSys
	CommandCall
	ShellCommand
	SystemConfiguration
	UserManagementCreation
	UserManagementRemove
	UserManagementUpdate
	UserManagementPasswordChange
	RuleManagementCreation
	RuleManagementRemove
	ModelManagementCreation
	ModelManagementRemove
	ActionManagementCreation
	ActionManagementRemove
	ActionManagementRun
	RouteManagementCreation
	RouteManagementRemove
	LogManagementCreation
	LogManagementUpdate
	LogManagementRemove
	LogManagementRead

	numScopes // one past the last scope
)

var scopeNames = [numScopes]string{
	Connect:                      "Connect",
	Publish:                      "Publish",
	Subscribe:                    "Subscribe",
	PublishSys:                   "PublishSys",
	SubscribeSys:                 "SubscribeSys",
	CommandCall:                  "CommandCall",
	ShellCommand:                 "ShellCommand",
	SystemConfiguration:          "SystemConfiguration",
	UserManagementCreation:       "UserManagementCreation",
	UserManagementRemove:         "UserManagementRemove",
	UserManagementUpdate:         "UserManagementUpdate",
	UserManagementPasswordChange: "UserManagementPasswordChange",
	RuleManagementCreation:       "RuleManagementCreation",
	RuleManagementRemove:         "RuleManagementRemove",
	ModelManagementCreation:      "ModelManagementCreation",
	ModelManagementRemove:        "ModelManagementRemove",
	ActionManagementCreation:     "ActionManagementCreation",
	ActionManagementRemove:       "ActionManagementRemove",
	ActionManagementRun:          "ActionManagementRun",
	RouteManagementCreation:      "RouteManagementCreation",
	RouteManagementRemove:        "RouteManagementRemove",
	LogManagementCreation:        "LogManagementCreation",
	LogManagementUpdate:          "LogManagementUpdate",
	LogManagementRemove:          "LogManagementRemove",
	LogManagementRead:            "LogManagementRead",
}

// scopeAliases are accepted spellings beyond the names above: connectors
// are the current name of routes.
var scopeAliases = map[string]Scope{
	"connectormanagementcreation": RouteManagementCreation,
	"connectormanagementremove":   RouteManagementRemove,
}

// String returns the scope's name as written in LoT ("Publish").
func (s Scope) String() string {
	if s > 0 && s < numScopes {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Valid reports whether s is one of the defined scopes.
func (s Scope) Valid() bool { return s > 0 && s < numScopes }

// Topical reports whether a rule of this scope may restrict itself with
// TO TOPIC: Publish, Subscribe, PublishSys and SubscribeSys.
func (s Scope) Topical() bool {
	return s == Publish || s == Subscribe || s == PublishSys || s == SubscribeSys
}

// subscription reports whether the topic of a request of this scope is a
// subscription filter rather than a topic name.
func (s Scope) subscription() bool { return s == Subscribe || s == SubscribeSys }

// Scopes returns every scope in declaration order.
func Scopes() []Scope {
	out := make([]Scope, 0, numScopes-1)
	for s := Connect; s < numScopes; s++ {
		out = append(out, s)
	}
	return out
}

// ParseScope returns the scope named s, ignoring case
// ("publish" is Publish); ConnectorManagement* are accepted for
// RouteManagement*.
func ParseScope(s string) (Scope, error) {
	for sc := Connect; sc < numScopes; sc++ {
		if strings.EqualFold(scopeNames[sc], s) {
			return sc, nil
		}
	}
	if sc, ok := scopeAliases[strings.ToLower(s)]; ok {
		return sc, nil
	}
	return 0, fmt.Errorf("rules: unknown scope %q (want one of %s)", s, strings.Join(scopeNames[1:], ", "))
}

// CommandTopic is the topic a publish to which is governed by CommandCall.
const CommandTopic = "$SYS/Coreflux/Command"

// PublishScope returns the scope that governs a publish to topic: CommandCall
// for the command topic, PublishSys for any other topic starting with '$'
// (reserved to the server by MQTT), Publish otherwise.
func PublishScope(topic string) Scope {
	switch {
	case topic == CommandTopic:
		return CommandCall
	case strings.HasPrefix(topic, "$"):
		return PublishSys
	}
	return Publish
}

// SubscribeScope returns the scope that governs a subscription to filter:
// SubscribeSys when the filter (without a $share/{group}/ prefix) starts
// with '$', Subscribe otherwise. Filters starting with a wildcard never see
// '$' topics, so they are plain Subscribe.
func SubscribeScope(filter string) Scope {
	if strings.HasPrefix(stripShare(filter), "$") {
		return SubscribeSys
	}
	return Subscribe
}

// stripShare returns the inner filter of $share/{group}/{filter}, or filter.
func stripShare(filter string) string {
	rest, ok := strings.CutPrefix(filter, "$share/")
	if !ok {
		return filter
	}
	if i := strings.IndexByte(rest, '/'); i > 0 {
		return rest[i+1:]
	}
	return filter
}
