package rules

import "fmt"

// SeedPriority is the priority of the three seed rules.
const SeedPriority = 1_000_000

// Seeds returns the three rules a new broker starts with (and that
// -restoreRules restores): every client may connect, publish and
// subscribe. They are ordinary rules, stored as definitions and removable;
// Source holds their LoT text.
func Seeds() []Rule {
	seed := func(name string, scope Scope, filter string) Rule {
		src := fmt.Sprintf("DEFINE RULE %s WITH PRIORITY %d FOR %s", name, SeedPriority, scope)
		if filter != "" {
			src += fmt.Sprintf(" TO TOPIC %q", filter)
		}
		return Rule{Name: name, Priority: SeedPriority, Scope: scope, TopicFilter: filter, Then: Allow,
			Source: src + " ALLOW\n"}
	}
	return []Rule{
		seed("AllowPublishTopic", Publish, "#"),
		seed("AllowSubscribeTopic", Subscribe, "#"),
		seed("AllowConnect", Connect, ""),
	}
}

// Permission flags of users (LOT.md §6.3) that the built-in rules read.
const (
	FlagSystemConfiguration = "AllowedSystemConfiguration"
	FlagUserManagement      = "AllowedUserManagement"
	FlagLogManagement       = "AllowedLogManagement"
	// FlagAssetManipulation is the older name for entity management.
	FlagAssetManipulation = "AllowedAssetManipulation"
)

// BuiltinPriority is the priority of the built-in rules.
const BuiltinPriority = 10

// Builtins returns the locked rules compiled in by the broker (Builtin set,
// priority BuiltinPriority, not removable). None of them denies: they grant
// what the permission flags promise, and what they do not grant falls to the
// user rules and, failing those, to "nothing matching denies":
//
//   - every user may subscribe to the statistics under $SYS/broker/ and
//     $SYS/Coreflux/Cluster/ (as broker/auth's built-in rules do);
//   - users with AllowedUserManagement or AllowedSystemConfiguration may
//     publish commands (CommandCall) and read $SYS/Coreflux/Command/Output
//     and $SYS/Coreflux/Projects/#;
//   - the management scopes are granted by their flag: SystemConfiguration
//     and ShellCommand by AllowedSystemConfiguration; UserManagement* by
//     AllowedUserManagement; Rule, Model, Action and Route management by
//     AllowedSystemConfiguration or AllowedAssetManipulation; LogManagement*
//     by AllowedLogManagement.
//
// Other $SYS publishes and subscriptions match no built-in rule, so only
// administrators (always allowed) and explicit user rules reach them.
func Builtins() []Rule {
	cmdUsers := Or(UserHas(FlagUserManagement), UserHas(FlagSystemConfiguration))
	assets := Or(UserHas(FlagSystemConfiguration), UserHas(FlagAssetManipulation))
	sysCfg := UserHas(FlagSystemConfiguration)
	users := UserHas(FlagUserManagement)
	logs := UserHas(FlagLogManagement)
	out := []Rule{
		builtin("BuiltinSysStatistics", SubscribeSys, "$SYS/broker/#", nil),
		builtin("BuiltinSysCluster", SubscribeSys, "$SYS/Coreflux/Cluster/#", nil),
		builtin("BuiltinSysCommandOutput", SubscribeSys, "$SYS/Coreflux/Command/Output", &cmdUsers),
		builtin("BuiltinSysProjects", SubscribeSys, "$SYS/Coreflux/Projects/#", &cmdUsers),
		builtin("BuiltinCommandCall", CommandCall, "", &cmdUsers),
	}
	grants := []struct {
		cond   *Cond
		scopes []Scope
	}{
		{&sysCfg, []Scope{SystemConfiguration, ShellCommand}},
		{&users, []Scope{UserManagementCreation, UserManagementRemove, UserManagementUpdate, UserManagementPasswordChange}},
		{&assets, []Scope{RuleManagementCreation, RuleManagementRemove, ModelManagementCreation, ModelManagementRemove,
			ActionManagementCreation, ActionManagementRemove, ActionManagementRun, RouteManagementCreation, RouteManagementRemove}},
		{&logs, []Scope{LogManagementCreation, LogManagementUpdate, LogManagementRemove, LogManagementRead}},
	}
	for _, g := range grants {
		for _, sc := range g.scopes {
			out = append(out, builtin("Builtin"+sc.String(), sc, "", g.cond))
		}
	}
	return out
}

func builtin(name string, scope Scope, filter string, cond *Cond) Rule {
	return Rule{Name: name, Priority: BuiltinPriority, Scope: scope, TopicFilter: filter, If: cond, Then: Allow, Builtin: true}
}
