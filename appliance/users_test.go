package appliance_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"gantry/appliance"
)

// usersWait bounds each wait of these tests: generous, since every
// -addUser and first login costs a bcrypt hash at the production cost,
// which takes seconds under the race detector on a loaded machine (the
// waits poll, so a fast machine does not pay it).
const usersWait = 60 * time.Second

// userClient is a paho (MQTT 5) client that keeps what it receives.
type userClient struct {
	*paho.Client
	mu   sync.Mutex
	msgs []*paho.Publish
}

func connectUser(t *testing.T, ip, user, password string) *userClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "1883"), usersWait)
	if err != nil {
		t.Fatal(err)
	}
	c := &userClient{}
	c.Client = paho.NewClient(paho.ClientConfig{Conn: nc, PacketTimeout: usersWait, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			c.mu.Lock()
			c.msgs = append(c.msgs, pr.Packet)
			c.mu.Unlock()
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), usersWait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: user + "-c", CleanStart: true, KeepAlive: 30,
		Username: user, UsernameFlag: true, Password: []byte(password), PasswordFlag: true})
	if err != nil {
		t.Fatalf("connect %s: %v (%+v)", user, err, ca)
	}
	t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}); nc.Close() })
	return c
}

func (c *userClient) sub(t *testing.T, filter string) byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), usersWait)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
	if sa == nil {
		t.Fatalf("subscribe %s: %v", filter, err)
	}
	return sa.Reasons[0]
}

func (c *userClient) pub(t *testing.T, topic, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), usersWait)
	defer cancel()
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: 1}); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}

// waitFor polls until a message on topic contains want, and returns it.
func (c *userClient) waitFor(t *testing.T, topic, want string) string {
	t.Helper()
	deadline := time.Now().Add(usersWait)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, m := range c.msgs {
			if m.Topic == topic && strings.Contains(string(m.Payload), want) {
				c.mu.Unlock()
				return string(m.Payload)
			}
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	t.Fatalf("nothing on %s containing %q", topic, want)
	return ""
}

func (c *userClient) on(topic string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.msgs {
		if m.Topic == topic {
			out = append(out, string(m.Payload))
		}
	}
	return out
}

const (
	commandTopic = "$SYS/Coreflux/Command"
	outputTopic  = "$SYS/Coreflux/Command/Output"
)

// TestPermissionFlagsAndGroups: conformance case C6 of the reference (a
// user without flags is refused a command; with AllowedSystemConfiguration
// the same command succeeds), a rule on a group admits its members only,
// and $SYS/Coreflux/Config/Users shows flags and groups without hashes.
func TestPermissionFlagsAndGroups(t *testing.T) {
	dataDir := t.TempDir()
	_, ip := startNode(t, map[string]string{"COREFLUX_DATA_DIR": dataDir, "COREFLUX_MQTT_ALLOW_ANONYMOUS": "false"})
	pw, err := os.ReadFile(filepath.Join(dataDir, "initial-root-password"))
	if err != nil {
		t.Fatal(err)
	}
	root := connectUser(t, ip, "root", strings.TrimSpace(string(pw)))
	root.sub(t, outputTopic)
	root.sub(t, appliance.UsersTopic)
	root.sub(t, "plant/#")
	cmd := func(line, want string) {
		t.Helper()
		root.pub(t, commandTopic, line+" -requestId "+want)
		if r := root.waitFor(t, outputTopic, want); !strings.Contains(r, `"success":true`) {
			t.Fatalf("%s: %s", line, r)
		}
	}
	cmd("-addUser op Pass123!", "r1")
	cmd("-addUser alice alicepw", "r2")
	cmd(`-addAction DEFINE ACTION Keep ON EVERY 1 HOUR DO PUBLISH TOPIC "k" WITH "k"`, "r4")

	// C6: op has no flag: cannot read the output, its command does nothing.
	op := connectUser(t, ip, "op", "Pass123!")
	if rc := op.sub(t, outputTopic); rc != 0x87 {
		t.Fatalf("op subscribes to the output: 0x%02x, want 0x87", rc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), usersWait)
	defer cancel()
	if r, _ := op.Publish(ctx, &paho.Publish{Topic: commandTopic, Payload: []byte("-removeAllActions -requestId op1"), QoS: 1}); r == nil || r.ReasonCode != 0x87 {
		t.Fatalf("op publishes a command without a flag: %+v, want PUBACK 0x87", r)
	}
	cmd("-listEntities", "r5") // after op's command, in order
	if r := root.waitFor(t, outputTopic, "r5"); !strings.Contains(r, "Keep") {
		t.Fatalf("op's -removeAllActions removed the actions: %s", r)
	}
	if got := root.on(outputTopic); strings.Contains(strings.Join(got, ""), "op1") {
		t.Fatalf("op's command was answered: %q", got)
	}
	cmd("-changeUserSettings op AllowedSystemConfiguration true", "r6")
	if rc := op.sub(t, outputTopic); rc >= 0x80 {
		t.Fatalf("op with the flag subscribes to the output: 0x%02x", rc)
	}
	op.pub(t, commandTopic, "-removeAllActions -requestId op2")
	if r := op.waitFor(t, outputTopic, "op2"); !strings.Contains(r, "Removed all actions successfully") {
		t.Fatalf("op's -removeAllActions with the flag: %s", r)
	}
	// op may not grant a flag it does not hold, nor change root.
	op.pub(t, commandTopic, "-changeUserSettings op AllowedUserManagement true -requestId op3")
	op.pub(t, commandTopic, "-changeUserSettings root AllowedLogManagement false -requestId op4")
	for _, id := range []string{"op3", "op4"} {
		if r := op.waitFor(t, outputTopic, id); !strings.Contains(r, `"success":false`) {
			t.Errorf("%s: %s", id, r)
		}
	}

	// A rule on a group.
	cmd(`-addRule DEFINE RULE Operators WITH PRIORITY 100 FOR Subscribe TO TOPIC "plant/#" IF USER IN GROUP "operators" THEN ALLOW ELSE DENY`, "r7")
	cmd("-addUserToGroup alice operators", "r8")
	if r := root.waitFor(t, outputTopic, "r8"); !strings.Contains(r, "added to group operators") {
		t.Errorf("-addUserToGroup: %s", r)
	}
	cmd("-listUserGroups alice", "r9")
	if r := root.waitFor(t, outputTopic, "r9"); !strings.Contains(r, `"groups":["operators"]`) {
		t.Errorf("-listUserGroups: %s", r)
	}
	alice := connectUser(t, ip, "alice", "alicepw")
	if rc := alice.sub(t, "plant/#"); rc >= 0x80 {
		t.Errorf("alice (operators) subscribes plant/#: 0x%02x", rc)
	}
	if rc := op.sub(t, "plant/#"); rc != 0x87 {
		t.Errorf("op (not in operators) subscribes plant/#: 0x%02x, want 0x87", rc)
	}
	root.pub(t, "plant/a", "one")
	alice.waitFor(t, "plant/a", "one")
	// Out of the group, alice's subscription no longer reads plant/#.
	cmd("-removeUserFromGroup alice operators", "r10")
	root.pub(t, "plant/a", "two")
	root.waitFor(t, "plant/a", "two") // root's copy left; alice's would have too
	alice.sub(t, "zz/x")
	root.pub(t, "zz/x", "barrier")
	alice.waitFor(t, "zz/x", "barrier")
	if got := alice.on("plant/a"); len(got) != 1 {
		t.Errorf("alice on plant/a after leaving the group: %q", got)
	}

	users := root.waitFor(t, appliance.UsersTopic, `"AllowedSystemConfiguration"`)
	if strings.Contains(users, "$2a$") || strings.Contains(users, "hash") {
		t.Errorf("%s shows password hashes: %s", appliance.UsersTopic, users)
	}
	if !strings.Contains(users, `{"name":"op","admin":false,"flags":["AllowedSystemConfiguration"],"groups":[]}`) {
		t.Errorf("%s: %s", appliance.UsersTopic, users)
	}
}
