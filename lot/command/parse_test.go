package command

import (
	"errors"
	"strings"
	"testing"

	"gantry/lot/defs"
)

const hello = `DEFINE ACTION Hello ON EVERY 10 SECONDS DO PUBLISH TOPIC "test" WITH "hello"`

const multi = "DEFINE ACTION Counter\nON TOPIC \"in\" DO\n    SET \"n\" WITH 1\n    PUBLISH TOPIC \"out\" WITH {n}"

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    Command
	}{
		{"flat add", "-addAction " + hello,
			Command{Verb: AddAction, Name: "-addAction", Kind: defs.Action, Source: hello, Target: "Hello"}},
		{"multi-line add keeps the source", "-addAction\n" + multi + "\n",
			Command{Verb: AddAction, Name: "-addAction", Kind: defs.Action, Source: multi, Target: "Counter"}},
		{"request id at the end of source (the MCP client's form)", "-addAction " + multi + " -requestId cursor-1a2b",
			Command{Verb: AddAction, Name: "-addAction", RequestID: "cursor-1a2b", Kind: defs.Action, Source: multi, Target: "Counter"}},
		{"request id on its own last line", "-addAction " + multi + "\n-requestId 7\n",
			Command{Verb: AddAction, Name: "-addAction", RequestID: "7", Kind: defs.Action, Source: multi, Target: "Counter"}},
		{"request id first", "-addAction -requestId 7 " + hello,
			Command{Verb: AddAction, Name: "-addAction", RequestID: "7", Kind: defs.Action, Source: hello, Target: "Hello"}},
		{"request id inside a LoT string is source", "-addAction " + `DEFINE ACTION S ON START DO PUBLISH TOPIC "t" WITH "x -requestId y"`,
			Command{Verb: AddAction, Name: "-addAction", Kind: defs.Action, Target: "S",
				Source: `DEFINE ACTION S ON START DO PUBLISH TOPIC "t" WITH "x -requestId y"`}},
		{"request id after a quoted string", `-addAction DEFINE ACTION S ON START DO PUBLISH TOPIC "t" WITH "x" -requestId "a b"`,
			Command{Verb: AddAction, Name: "-addAction", RequestID: "a b", Kind: defs.Action, Target: "S",
				Source: `DEFINE ACTION S ON START DO PUBLISH TOPIC "t" WITH "x"`}},
		{"comment before DEFINE, lower-case keywords", "-addModel // energy\n/* block\n*/\ndefine model Meter COLLAPSED",
			Command{Verb: AddModel, Name: "-addModel", Kind: defs.Model, Target: "Meter",
				Source: "// energy\n/* block\n*/\ndefine model Meter COLLAPSED"}},
		{"user setting", "-changeUserSettings op AllowedSystemConfiguration TRUE",
			Command{Verb: ChangeUserSettings, Name: "-changeUserSettings", Target: "op", Value: "AllowedSystemConfiguration", On: true}},
		{"add to group", "--add-user-to-group alice \"operators\"",
			Command{Verb: AddUserToGroup, Name: "-addUserToGroup", Target: "alice", Value: "operators"}},
		{"list groups", "-listUserGroups alice -requestId 3",
			Command{Verb: ListUserGroups, Name: "-listUserGroups", Target: "alice", RequestID: "3"}},
		{"route alias", "-addRoute DEFINE ROUTE Press1 WITH TYPE MODBUS_TCP",
			Command{Verb: AddConnector, Name: "-addRoute", Kind: defs.Connector, Target: "Press1", Source: "DEFINE ROUTE Press1 WITH TYPE MODBUS_TCP"}},
		{"connector with route source", "-addConnector DEFINE ROUTE P WITH TYPE S7",
			Command{Verb: AddConnector, Name: "-addConnector", Kind: defs.Connector, Target: "P", Source: "DEFINE ROUTE P WITH TYPE S7"}},
		{"kebab alias and BOM", "\uFEFF  --add-rule DEFINE RULE R WITH PRIORITY 1 FOR Connect ALLOW",
			Command{Verb: AddRule, Name: "-addRule", Kind: defs.Rule, Target: "R", Source: "DEFINE RULE R WITH PRIORITY 1 FOR Connect ALLOW"}},
		{"remove", "-removeAction Hello", Command{Verb: RemoveAction, Name: "-removeAction", Kind: defs.Action, Target: "Hello"}},
		{"remove with request id", "-removeRoute P -requestId 42",
			Command{Verb: RemoveConnector, Name: "-removeRoute", Kind: defs.Connector, Target: "P", RequestID: "42"}},
		{"request id with =", "-removeModel M --request-id=x9", Command{Verb: RemoveModel, Name: "-removeModel", Kind: defs.Model, Target: "M", RequestID: "x9"}},
		{"remove all, any case", "-REMOVEALLMODELS", Command{Verb: RemoveAllModels, Name: "-removeAllModels", Kind: defs.Model}},
		{"remove all routes", "--remove-all-routes -requestId 3", Command{Verb: RemoveAllConnectors, Name: "-removeAllRoutes", Kind: defs.Connector, RequestID: "3"}},
		{"run with JSON", `-runAction Average2 {"a":1,"b":3}`,
			Command{Verb: RunAction, Name: "-runAction", Kind: defs.Action, Target: "Average2", Input: []byte(`{"a":1,"b":3}`)}},
		{"run with JSON and request id", `-runAction Sim {"topic":"a b","payload":"x"} -requestId r1`,
			Command{Verb: RunAction, Name: "-runAction", Kind: defs.Action, Target: "Sim", RequestID: "r1", Input: []byte(`{"topic":"a b","payload":"x"}`)}},
		{"run bare", "-runAction Tick", Command{Verb: RunAction, Name: "-runAction", Kind: defs.Action, Target: "Tick"}},
		{"add user", "-addUser op Pass123!", Command{Verb: AddUser, Name: "-addUser", Target: "op", Value: "Pass123!"}},
		{"quoted password", `-changeUserPassword op "pass word \"x\""`,
			Command{Verb: ChangeUserPassword, Name: "-changeUserPassword", Target: "op", Value: `pass word "x"`}},
		{"remove user", "-removeUser op", Command{Verb: RemoveUser, Name: "-removeUser", Target: "op"}},
		{"env", "-setEnv PLC_IP=192.168.1.10", Command{Verb: SetEnv, Name: "-setEnv", Target: "PLC_IP", Value: "192.168.1.10"}},
		{"env with spaces", "-setEnv GREETING=hello world -requestId 5", Command{Verb: SetEnv, Name: "-setEnv", Target: "GREETING", Value: "hello world", RequestID: "5"}},
		{"env name value", `-setEnv GREETING "hi there"`, Command{Verb: SetEnv, Name: "-setEnv", Target: "GREETING", Value: "hi there"}},
		{"env empty value", "-setEnv X=", Command{Verb: SetEnv, Name: "-setEnv", Target: "X"}},
		{"secret with = in value", "-setSecret TOKEN=a=b==", Command{Verb: SetSecret, Name: "-setSecret", Target: "TOKEN", Value: "a=b=="}},
		{"project quoted", `-loadProject "Traceability System"`, Command{Verb: LoadProject, Name: "-loadProject", Target: "Traceability System"}},
		{"list entities", "-listEntities -requestId abc", Command{Verb: ListEntities, Name: "-listEntities", RequestID: "abc"}},
		{"update data", "-updateData", Command{Verb: UpdateData, Name: "-updateData"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.payload))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got.String() != tc.want.String() || got.Source != tc.want.Source || got.Value != tc.want.Value ||
				string(got.Input) != string(tc.want.Input) || got.Kind != tc.want.Kind || got.Verb != tc.want.Verb {
				t.Fatalf("Parse =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, payload string
		want          string
		id            string // request id still read
		suggest       string
		unknown       bool
	}{
		{"empty", " \n ", "empty command", "", "", false},
		{"not utf-8", "-addAction \xff", "not valid UTF-8", "", "", false},
		{"no dash", "addAction X", "Unknown command: addAction (a command starts with '-')", "", "-addAction", true},
		{"typo", "-addActon DEFINE ACTION X -requestId 9", "Unknown command: -addActon", "9", "-addAction", true},
		{"unknown", "-frobnicate", "Unknown command: -frobnicate", "", "", true},
		{"python", "-addPython # Script Name: X", "Command -addPython is not supported: Gantry does not run Python", "", "", false},
		{"not yet", "-listProjects -requestId 1", "Command -listProjects is not supported: it is not implemented yet", "1", "", false},
		{"listEnv takes nothing", "-listEnv X", "-listEnv takes no arguments", "", "", false},
		{"setting without a boolean", "-changeUserSettings op AllowedSystemConfiguration yes", `"yes", want true or false`, "", "", false},
		{"setting missing", "-changeUserSettings op", "takes a user name, a permission flag and true or false", "", "", false},
		{"group missing", "-removeUserFromGroup op", "takes a user name and a group", "", "", false},
		{"add without source", "-addAction -requestId 4", "-addAction needs LoT source", "4", "", false},
		{"add wrong kind", "-addAction DEFINE MODEL M", "-addAction got DEFINE MODEL; it deploys DEFINE ACTION definitions", "", "", false},
		{"add not LoT", "-addRule hello", `-addRule needs LoT source starting with DEFINE RULE <Name>, got "hello"`, "", "", false},
		{"remove without name", "-removeAction", "-removeAction takes one name, got none", "", "", false},
		{"remove two names", "-removeAction a b", `got 2 arguments: "a", "b"`, "", "", false},
		{"unterminated", `-removeAction "a`, "unterminated quote", "", "", false},
		{"remove all with args", "-removeAllActions now", `-removeAllActions takes no arguments, got "now"`, "", "", false},
		{"user without password", "-addUser op", "-addUser takes a user name and a password, got 1 arguments", "", "", false},
		{"bad JSON", "-runAction A {nope}", "-runAction A: the input is not valid JSON", "", "", false},
		{"run without name", "-runAction", "-runAction needs an action name", "", "", false},
		{"env without value", "-setEnv X", `-setEnv needs NAME=value, got "X"`, "", "", false},
		{"env bad name", "-setEnv 1X=2", `name "1X" has '1' at byte 0`, "", "", false},
		{"request id without value", "-listEntities -requestId", "-requestId needs a value", "", "", false},
		{"project with spaces unquoted", "-loadProject My Project", "quote it if it has spaces", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := Parse([]byte(tc.payload))
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, tc.want) {
				t.Fatalf("Parse error = %v, want %q", err, tc.want)
			}
			if cmd.RequestID != tc.id {
				t.Fatalf("RequestID = %q, want %q", cmd.RequestID, tc.id)
			}
			if pe.Unknown != tc.unknown || tc.suggest != "" && (len(pe.Suggestions) == 0 || pe.Suggestions[0] != tc.suggest) {
				t.Fatalf("unknown %v, suggestions %v; want %v, %q first", pe.Unknown, pe.Suggestions, tc.unknown, tc.suggest)
			}
		})
	}
}

func TestStringHidesSecrets(t *testing.T) {
	for _, p := range []string{"-addUser op s3cret", "-changeUserPassword op s3cret", "-setSecret K=s3cret"} {
		cmd, err := Parse([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(cmd.String(), "s3cret") {
			t.Errorf("String() of %q shows the secret: %s", p, cmd)
		}
	}
}
