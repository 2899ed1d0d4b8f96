package webui

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Setup applies the first-boot configuration; the appliance implements
// it over the user store and the configuration file.
type Setup interface {
	// Pending reports whether the node still waits for its first setup:
	// the administrator root has the random password it was created with.
	Pending() bool
	// Validate returns the problems of a configuration, each naming the
	// field ("Cluster.ClusterId ...").
	Validate(SetupConfig) []string
	// Apply replaces root's password, writes the settings and ends setup.
	Apply(ctx context.Context, s SetupConfig) error
	// Discover lists the Gantry nodes that announce themselves on the LAN.
	Discover(ctx context.Context) ([]Gateway, error)
}

// SetupConfig is what the wizard collects.
type SetupConfig struct {
	Password       string   `json:"-"` // never written to disk by the console
	NodeName       string   `json:"nodeName"`
	ClusterEnabled bool     `json:"clusterEnabled"`
	ClusterID      string   `json:"clusterId"`
	SharedSecret   string   `json:"sharedSecret"`
	Discovery      string   `json:"discovery"` // multicast, zeroconf, seeds, kubernetes
	Seeds          []string `json:"seeds"`
	KubernetesDNS  string   `json:"kubernetesServiceDns"`
	Durability     bool     `json:"durability"`
}

// Gateway is a node found on the LAN.
type Gateway struct {
	NodeName  string
	ClusterID string
	Address   string
}

// Steps of the wizard, in order.
var setupSteps = []struct{ Key, Label string }{
	{"password", "Administrator"},
	{"node", "Node name"},
	{"cluster", "Cluster"},
	{"discovery", "Discovery"},
	{"durability", "Durability"},
	{"review", "Review"},
}

func stepIndex(key string) int {
	return slices.IndexFunc(setupSteps, func(s struct{ Key, Label string }) bool { return s.Key == key })
}

// wizardFile keeps the wizard's progress (not the password), so that a
// reload or a reboot resumes at the same step.
const wizardFile = "console-setup.json"

type wizardState struct {
	Step   string      `json:"step"`
	Config SetupConfig `json:"config"`
}

type wizard struct {
	path     string
	mu       sync.Mutex // guards st, password
	st       wizardState
	password string // in memory only: after a restart the review asks for it again
}

func newWizard(dataDir string) *wizard {
	w := &wizard{st: wizardState{Step: "password", Config: SetupConfig{ClusterID: "coreflux-cluster", Discovery: "multicast", Durability: true}}}
	if dataDir != "" {
		w.path = filepath.Join(dataDir, wizardFile)
		if b, err := os.ReadFile(w.path); err == nil {
			var st wizardState
			if json.Unmarshal(b, &st) == nil && stepIndex(st.Step) >= 0 {
				w.st = st
			}
		}
	}
	if w.st.Config.NodeName == "" {
		w.st.Config.NodeName, _ = os.Hostname()
	}
	return w
}

func (w *wizard) snapshot() (wizardState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st, w.password != ""
}

func (w *wizard) save(st wizardState, password string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st = st
	if password != "" {
		w.password = password
	}
	if w.path != "" {
		b, _ := json.Marshal(st)
		os.WriteFile(w.path+".tmp", b, 0o600)
		os.Rename(w.path+".tmp", w.path)
	}
}

func (w *wizard) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.password = ""
	if w.path != "" {
		os.Remove(w.path)
	}
}

// setupView is one step of the wizard as the page shows it.
type setupView struct {
	Step        string
	Config      SetupConfig
	PasswordSet bool
	Errors      []string // of this step
	Gateways    []Gateway
	DiscoverErr string
}

func (c *Console) serveSetup(w http.ResponseWriter, r *http.Request) {
	if !c.setupPending() {
		http.Redirect(w, r, prefix, http.StatusSeeOther)
		return
	}
	nonce := preNonce(w, r)
	st, pwSet := c.wizard.snapshot()
	v := setupView{Step: st.Step, Config: st.Config, PasswordSet: pwSet}
	if s := r.URL.Query().Get("step"); stepIndex(s) >= 0 && stepIndex(s) <= stepIndex(st.Step) {
		v.Step = s // back to a step already done
	}
	c.prepareStep(r.Context(), &v)
	c.render(w, r, http.StatusOK, SetupPage(c.wizardFrame(r, nonce), v))
}

func (c *Console) wizardFrame(r *http.Request, nonce string) frame {
	f := c.frame(&req{theme: themeOf(r)}, "Set up this node", "")
	f.CSRF = c.sessions.preToken(nonce)
	f.Wizard = true
	f.Back = prefix + "setup"
	return f
}

// prepareStep loads what a step shows beyond the form: the gateways found.
func (c *Console) prepareStep(ctx context.Context, v *setupView) {
	if v.Step == "discovery" {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		gws, err := c.o.Setup.Discover(ctx)
		v.Gateways = gws
		if err != nil {
			v.DiscoverErr = err.Error()
		}
	}
	if v.Step == "review" {
		v.Errors = c.o.Setup.Validate(v.Config)
		if !v.PasswordSet {
			v.Errors = append(v.Errors, "The administrator password is not set (the node restarted during setup): go back to Administrator and enter it again.")
		}
	}
}

// postSetup takes one step's form: it validates it, saves the progress and
// goes to the next step (or back); the review step applies.
func (c *Console) postSetup(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !c.setupPending() {
		http.Redirect(w, r, prefix, http.StatusSeeOther)
		return
	}
	ck, err := r.Cookie(preCookie)
	if err != nil || !tokenOK(r, c.sessions.preToken(ck.Value)) {
		http.Error(w, "This form has expired or did not come from the console (CSRF token missing or wrong). Reload the page and try again.", http.StatusForbidden)
		return
	}
	st, pwSet := c.wizard.snapshot()
	step := r.PostFormValue("step")
	if stepIndex(step) < 0 || stepIndex(step) > stepIndex(st.Step) {
		step = st.Step
	}
	v := setupView{Step: step, Config: st.Config, PasswordSet: pwSet}
	fr := c.wizardFrame(r, ck.Value)
	if r.PostFormValue("go") == "back" {
		if i := stepIndex(step); i > 0 {
			http.Redirect(w, r, prefix+"setup?step="+setupSteps[i-1].Key, http.StatusSeeOther)
			return
		}
	}
	password := ""
	switch step {
	case "password":
		password = r.PostFormValue("password")
		if msg := passwordProblem(password, r.PostFormValue("password2")); msg != "" {
			v.Errors = []string{msg}
		} else {
			v.PasswordSet = true
		}
	case "node":
		v.Config.NodeName = strings.TrimSpace(r.PostFormValue("nodeName"))
		if v.Config.NodeName == "" {
			v.Errors = []string{"Enter a node name: it names this gateway in the cluster and must not change later."}
		}
	case "cluster":
		v.Config.ClusterEnabled = r.PostFormValue("mode") != "standalone"
		v.Config.ClusterID = strings.TrimSpace(r.PostFormValue("clusterId"))
		v.Config.SharedSecret = r.PostFormValue("sharedSecret")
		if join := r.PostFormValue("join"); join != "" {
			v.Config.ClusterEnabled, v.Config.ClusterID = true, join
		}
		if v.Config.ClusterEnabled && v.Config.ClusterID == "" {
			v.Errors = append(v.Errors, "Enter a cluster ID: every node of one cluster has the same.")
		}
		if v.Config.ClusterEnabled && len(v.Config.SharedSecret) < 16 {
			v.Errors = append(v.Errors, "Enter a shared secret of at least 16 characters: it signs the traffic between nodes, and every node of the cluster has the same.")
		}
	case "discovery":
		v.Config.Discovery = r.PostFormValue("discovery")
		v.Config.Seeds = splitList(r.PostFormValue("seeds"))
		v.Config.KubernetesDNS = strings.TrimSpace(r.PostFormValue("kubernetesDns"))
		if join := r.PostFormValue("join"); join != "" {
			v.Config.ClusterEnabled, v.Config.ClusterID = true, join
		}
		switch v.Config.Discovery {
		case "multicast", "zeroconf":
		case "seeds":
			if len(v.Config.Seeds) == 0 {
				v.Errors = append(v.Errors, "Enter at least one seed address (host:9200), one per line.")
			}
		case "kubernetes":
			if v.Config.KubernetesDNS == "" {
				v.Errors = append(v.Errors, "Enter the DNS name of the headless Service.")
			}
		default:
			v.Errors = append(v.Errors, "Choose how the nodes find each other.")
		}
	case "durability":
		v.Config.Durability = r.PostFormValue("durability") == "on"
	case "review":
		c.applySetup(w, r, fr, v)
		return
	}
	if len(v.Errors) > 0 {
		c.prepareStep(r.Context(), &v)
		c.render(w, r, http.StatusUnprocessableEntity, SetupPage(fr, v))
		return
	}
	next := st.Step
	if i := stepIndex(step) + 1; i > stepIndex(next) {
		next = setupSteps[i].Key
	}
	if step == "cluster" && !v.Config.ClusterEnabled && stepIndex(next) <= stepIndex("discovery") {
		next = "durability" // a standalone node discovers nothing
	}
	c.wizard.save(wizardState{Step: next, Config: v.Config}, password)
	target := setupSteps[min(stepIndex(step)+1, len(setupSteps)-1)].Key
	if step == "cluster" && !v.Config.ClusterEnabled {
		target = "durability"
	}
	http.Redirect(w, r, prefix+"setup?step="+target, http.StatusSeeOther)
}

func (c *Console) applySetup(w http.ResponseWriter, r *http.Request, fr frame, v setupView) {
	c.prepareStep(r.Context(), &v)
	if len(v.Errors) > 0 {
		c.render(w, r, http.StatusUnprocessableEntity, SetupPage(fr, v))
		return
	}
	c.wizard.mu.Lock()
	v.Config.Password = c.wizard.password
	c.wizard.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := c.o.Setup.Apply(ctx, v.Config); err != nil {
		v.Errors = []string{"Setup was not applied: " + err.Error()}
		c.render(w, r, http.StatusUnprocessableEntity, SetupPage(fr, v))
		return
	}
	c.wizard.finish()
	c.log.Info("first-boot setup applied from the console", "node", v.Config.NodeName, "remote", clientIP(r))
	c.startSession(w, r, "root")
	http.Redirect(w, r, prefix+"health", http.StatusSeeOther)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' || r == ' ' || r == '\r' }) {
		out = append(out, f)
	}
	return out
}

func stepState(current, key string) string {
	switch i, j := stepIndex(key), stepIndex(current); {
	case i < j:
		return "done"
	case i == j:
		return "current"
	}
	return ""
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func prevStepURL(step string) string {
	i := max(stepIndex(step)-1, 0)
	return prefix + "setup?step=" + setupSteps[i].Key
}
