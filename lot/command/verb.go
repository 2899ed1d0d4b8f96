package command

import (
	"strings"
	"sync"

	"gantry/lot/defs"
)

// Verb is a command Gantry implements.
type Verb uint8

// Verbs. Aliases (-addRoute for -addConnector, --kebab-case spellings)
// parse to the same Verb; Command.Name keeps the spelling used.
const (
	AddAction Verb = iota + 1
	RemoveAction
	RemoveAllActions
	RunAction
	AddModel
	RemoveModel
	RemoveAllModels
	AddRule
	RemoveRule
	AddConnector
	RemoveConnector
	RemoveAllConnectors
	AddUser
	RemoveUser
	ChangeUserPassword
	ChangeUserSettings
	AddUserToGroup
	RemoveUserFromGroup
	ListUserGroups
	SetEnv
	SetSecret
	ListEnv
	RemoveEnv
	ListSecrets
	RemoveSecret
	RestoreRules
	LotDiagnostic
	LoadProject
	ListEntities
	ActionTrace
	// UpdateData refreshes $SYS statistics and, as in the reference, gets
	// no reply.
	UpdateData

	numVerbs
)

// argShape is what follows a command's name.
type argShape uint8

const (
	argsNone      argShape = iota // nothing
	argsSource                    // LoT source, verbatim
	argsName                      // one token
	argsRun                       // a name, then optional JSON
	argsUserPass                  // user and password
	argsAssign                    // NAME=value or NAME value
	argsUserFlag                  // user, flag, true|false
	argsUserGroup                 // user and group
	argsKindName                  // model, action, route, connector or rule, then a name
	argsTrace                     // a name, all, off, status, or remove and a name
)

type verbInfo struct {
	names []string  // camelCase spellings, the first canonical
	kind  defs.Kind // entity kind, for entity verbs
	args  argShape
	scope string // the rules scope that governs it (rules.Scope names)
}

var verbs = [numVerbs]verbInfo{
	AddAction:           {[]string{"addAction"}, defs.Action, argsSource, "ActionManagementCreation"},
	RemoveAction:        {[]string{"removeAction"}, defs.Action, argsName, "ActionManagementRemove"},
	RemoveAllActions:    {[]string{"removeAllActions"}, defs.Action, argsNone, "ActionManagementRemove"},
	RunAction:           {[]string{"runAction"}, defs.Action, argsRun, "ActionManagementRun"},
	AddModel:            {[]string{"addModel"}, defs.Model, argsSource, "ModelManagementCreation"},
	RemoveModel:         {[]string{"removeModel"}, defs.Model, argsName, "ModelManagementRemove"},
	RemoveAllModels:     {[]string{"removeAllModels"}, defs.Model, argsNone, "ModelManagementRemove"},
	AddRule:             {[]string{"addRule"}, defs.Rule, argsSource, "RuleManagementCreation"},
	RemoveRule:          {[]string{"removeRule"}, defs.Rule, argsName, "RuleManagementRemove"},
	AddConnector:        {[]string{"addConnector", "addRoute"}, defs.Connector, argsSource, "RouteManagementCreation"},
	RemoveConnector:     {[]string{"removeConnector", "removeRoute"}, defs.Connector, argsName, "RouteManagementRemove"},
	RemoveAllConnectors: {[]string{"removeAllConnectors", "removeAllRoutes"}, defs.Connector, argsNone, "RouteManagementRemove"},
	AddUser:             {[]string{"addUser"}, "", argsUserPass, "UserManagementCreation"},
	RemoveUser:          {[]string{"removeUser"}, "", argsName, "UserManagementRemove"},
	ChangeUserPassword:  {[]string{"changeUserPassword"}, "", argsUserPass, "UserManagementPasswordChange"},
	ChangeUserSettings:  {[]string{"changeUserSettings"}, "", argsUserFlag, "UserManagementUpdate"},
	AddUserToGroup:      {[]string{"addUserToGroup"}, "", argsUserGroup, "UserManagementUpdate"},
	RemoveUserFromGroup: {[]string{"removeUserFromGroup"}, "", argsUserGroup, "UserManagementUpdate"},
	ListUserGroups:      {[]string{"listUserGroups"}, "", argsName, "UserManagementUpdate"},
	SetEnv:              {[]string{"setEnv"}, "", argsAssign, "SystemConfiguration"},
	SetSecret:           {[]string{"setSecret"}, "", argsAssign, "SystemConfiguration"},
	ListEnv:             {[]string{"listEnv"}, "", argsNone, "SystemConfiguration"},
	RemoveEnv:           {[]string{"removeEnv"}, "", argsName, "SystemConfiguration"},
	ListSecrets:         {[]string{"listSecrets"}, "", argsNone, "SystemConfiguration"},
	RemoveSecret:        {[]string{"removeSecret"}, "", argsName, "SystemConfiguration"},
	RestoreRules:        {[]string{"restoreRules"}, "", argsNone, "SystemConfiguration"},
	LotDiagnostic:       {[]string{"lotDiagnostic"}, "", argsKindName, ""},
	LoadProject:         {[]string{"loadProject"}, "", argsName, "SystemConfiguration"},
	ListEntities:        {[]string{"listEntities"}, "", argsNone, "SystemConfiguration"},
	ActionTrace:         {[]string{"actionTrace"}, defs.Action, argsTrace, "ActionManagementRun"},
	UpdateData:          {[]string{"updateData"}, "", argsNone, ""},
}

// String returns the canonical spelling without dash ("addAction").
func (v Verb) String() string {
	if v > 0 && v < numVerbs {
		return verbs[v].names[0]
	}
	return "unknown"
}

// Scope names the access-rule scope that governs the verb (LOT.md §8.2),
// for instance "ActionManagementCreation"; "" when none applies.
func (v Verb) Scope() string {
	if v > 0 && v < numVerbs {
		return verbs[v].scope
	}
	return ""
}

// Kind returns the entity kind of an entity verb, "" for others.
func (v Verb) Kind() defs.Kind {
	if v > 0 && v < numVerbs {
		return verbs[v].kind
	}
	return ""
}

// unsupported are commands of the reference Gantry recognises but does not
// implement, by fold(name), with the reason given in the reply.
var unsupported = map[string]struct{ name, why string }{}

func init() {
	reasons := []struct {
		why   string
		names []string
	}{
		{"Gantry does not run Python", []string{"addPython", "removePython", "removeAllPythonScripts",
			"installPythonPackage", "listPythonPackages"}},
		{"Gantry has no panels or themes", []string{"addPanel", "addVisu", "removePanel", "removeVisu", "listPanels",
			"panelCode", "updateVisuState", "addVisuFile", "refreshVisu", "addTheme", "removeTheme", "listThemes", "removeAllThemes"}},
		{"Gantry has no AI routes", []string{"discoverAIProviders"}},
		{"Gantry has no licence", []string{"loadLicense"}},
		{"legacy HUB asset commands are not supported", []string{"install", "installWithToken", "uninstall",
			"uninstallWithToken", "uninstallMultiple", "run", "stop", "assetDefaultConfig", "assetHelp", "assetSchema",
			"assetConfigSave", "assetConfigLoad", "assetPolicySet", "assetNameSet"}},
		{"it is not implemented yet", []string{"getPendingStatus", "listRoutes",
			"listConnectors", "routeCode", "listTemplates", "checkRouteConnection", "connectionStatus", "routeCertificates",
			"addProject", "removeProject", "unloadProject", "listProjects", "getProject",
			"duplicateProject", "projectCheckout", "projectPull", "projectPush", "projectStatus", "projectManifest",
			"auditStatus", "auditQuery", "decryptAudit", "addTraceLog", "listTraceLogs",
			"removeTraceLog", "removeAllTraceLogs"}},
	}
	for _, r := range reasons {
		for _, n := range r.names {
			unsupported[fold(n)] = struct{ name, why string }{n, r.why}
		}
	}
}

// lookup maps fold(spelling) to a verb and its camelCase spelling.
var lookup = func() map[string]struct {
	verb Verb
	name string
} {
	m := map[string]struct {
		verb Verb
		name string
	}{}
	for v := AddAction; v < numVerbs; v++ {
		for _, n := range verbs[v].names {
			m[fold(n)] = struct {
				verb Verb
				name string
			}{v, n}
		}
	}
	return m
}()

// fold reduces a command word to its lookup key: no dashes, lower case, so
// "-addAction", "--add-action" and "-ADDACTION" are one command.
func fold(word string) string {
	return strings.ToLower(strings.ReplaceAll(word, "-", ""))
}

// known lists every command name Gantry recognises, supported or not,
// with its fold, for suggestions.
var known = sync.OnceValue(func() []struct{ name, folded string } {
	var out []struct{ name, folded string }
	add := func(n string) { out = append(out, struct{ name, folded string }{n, fold(n)}) }
	for v := AddAction; v < numVerbs; v++ {
		for _, n := range verbs[v].names {
			add(n)
		}
	}
	for _, u := range unsupported {
		add(u.name)
	}
	return out
})

// pascal turns a camelCase command name into the reply's "command" field
// ("addRoute" -> "AddRoute").
func pascal(name string) string {
	if name == "" {
		return ""
	}
	return strings.ToUpper(name[:1]) + name[1:]
}
