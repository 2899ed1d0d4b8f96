package appliance

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"gantry/broker"
)

// This file joins the node to systemd and to the appliance's boot
// assessment: readiness (READY=1 once every listener is bound), watchdog
// pings that are sent only while a message still makes it through the
// broker, and GET /health/ready, which the image's boot check asks before
// it marks an updated slot good.
//
// Outside systemd (no NOTIFY_SOCKET) the notifications are no-ops; the
// liveness probe and /health/ready work the same everywhere.

// liveTimeout bounds one liveness round trip.
const liveTimeout = 2 * time.Second

// liveness proves that the broker routes: a message delivered to a
// private topic reaches an in-process subscriber of it. A broker whose
// topic tree or delivery goroutines are stuck fails the probe, so the
// watchdog stops being fed and systemd restarts the node.
type liveness struct {
	mu     sync.Mutex // serialises probes; guards seq
	seq    uint64
	topic  string
	got    chan uint64 // sequence numbers seen by the subscriber
	client *broker.Client
}

func newLiveness(b *broker.Server) (*liveness, error) {
	var r [8]byte
	rand.Read(r[:])
	lv := &liveness{topic: "$SYS/gantry/liveness/" + hex.EncodeToString(r[:]), got: make(chan uint64, 1)}
	lv.client = b.NewClient("$gantry-liveness", broker.OriginBroker, func(m *broker.Message) {
		if seq, err := strconv.ParseUint(string(m.Payload), 10, 64); err == nil {
			select {
			case lv.got <- seq:
			default:
			}
		}
	})
	if err := lv.client.Subscribe(lv.topic, 0); err != nil {
		lv.client.Close()
		return nil, fmt.Errorf("liveness subscription: %w", err)
	}
	return lv, nil
}

// probe delivers one message (locally only: no hooks, so neither the
// cluster nor LoT sees it) and waits for it.
func (lv *liveness) probe(b *broker.Server, timeout time.Duration) error {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.seq++
	want := lv.seq
	b.Deliver(&broker.Message{Topic: lv.topic, Payload: []byte(strconv.FormatUint(want, 10)),
		Origin: broker.OriginBroker, ClientID: "$gantry-liveness"})
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case seq := <-lv.got:
			if seq == want {
				return nil
			}
		case <-deadline.C:
			return fmt.Errorf("broker did not route a liveness message within %v", timeout)
		}
	}
}

// startSystemd runs at the end of Start: it opens the liveness probe,
// tells systemd the node is ready and, when the unit has WatchdogSec,
// starts feeding the watchdog.
func (n *Node) startSystemd() error {
	lv, err := newLiveness(n.Broker)
	if err != nil {
		return err
	}
	n.live = lv
	status := fmt.Sprintf("STATUS=serving MQTT on %s:%d, operations on %s:%d", n.cfg.Mqtt.BindIP, n.cfg.Mqtt.Port,
		n.cfg.Ops.BindIP, n.cfg.Ops.Port)
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady+"\n"+status); err != nil {
		n.log.Warn("sd_notify READY failed", "component", "systemd", "err", err)
	}
	iv, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("watchdog settings not understood; not feeding it", "component", "systemd", "err", err)
	}
	if iv > 0 {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.runWatchdog(iv)
		}()
	}
	return nil
}

// runWatchdog pings the systemd watchdog twice per interval, each time
// only after a liveness round trip succeeded. It returns when the node
// stops.
func (n *Node) runWatchdog(interval time.Duration) {
	n.log.Info("feeding the systemd watchdog", "component", "systemd", "interval", interval)
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	failing := false
	for {
		err := n.live.probe(n.Broker, min(liveTimeout, interval/4))
		switch {
		case err != nil && !failing:
			n.log.Error("broker not live; the watchdog is no longer fed", "component", "systemd", "err", err)
			failing = true
		case err == nil:
			if failing {
				n.log.Info("broker live again; feeding the watchdog", "component", "systemd")
				failing = false
			}
			daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		}
		select {
		case <-t.C:
		case <-n.stop:
			return
		}
	}
}

// stopSystemd runs first in Shutdown: systemd learns the node is
// stopping (so a slow shutdown is not taken for a hang). The liveness
// client goes with the broker.
func (n *Node) stopSystemd() {
	daemon.SdNotify(false, daemon.SdNotifyStopping)
}

// readiness is the body of GET /health/ready.
type readiness struct {
	Status  string `json:"status"` // ready, starting, stopping or not-live
	Version string `json:"version"`
	Slot    string `json:"slot,omitempty"` // the appliance's root slot (a or b), from gantry.slot= on the kernel command line
	Error   string `json:"error,omitempty"`
}

// serveReady answers 200 only when every listener is bound and a message
// makes it through the broker now; 503 otherwise.
func (n *Node) serveReady(w http.ResponseWriter, r *http.Request) {
	rd := readiness{Status: "ready", Version: Version, Slot: bootSlot()}
	switch {
	case !n.ready.Load():
		rd.Status = "starting"
		select {
		case <-n.stop:
			rd.Status = "stopping"
		default:
		}
	case n.live == nil:
		rd.Status = "starting"
	default:
		if err := n.live.probe(n.Broker, liveTimeout); err != nil {
			rd.Status, rd.Error = "not-live", err.Error()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if rd.Status != "ready" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(rd)
}

var (
	slotOnce sync.Once
	slot     string
)

// bootSlot returns the appliance's root slot: $GANTRY_SLOT (the unit sets
// it, since its sandbox hides /proc/cmdline), else gantry.slot= on the
// kernel command line; "" outside the appliance.
func bootSlot() string {
	slotOnce.Do(func() {
		if slot = os.Getenv("GANTRY_SLOT"); slot == "" {
			slot = slotFromCmdline(readCmdline())
		}
	})
	return slot
}

func readCmdline() string {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return ""
	}
	return string(b)
}

func slotFromCmdline(cmdline string) string {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, "gantry.slot="); ok {
			return v
		}
	}
	return ""
}
