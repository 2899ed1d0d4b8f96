package webui

// frame is what every page's chrome needs.
type frame struct {
	Title  string
	Active string // the navigation entry of the page
	User   string // "" before login
	Admin  bool
	CSRF   string
	Theme  string // auto, light or dark
	Back   string // where the theme form returns
	Assets *assets
	Wizard bool // the setup wizard's chrome: no navigation
}

func (f frame) asset(name string) string { return f.Assets.url(name) }

type loginForm struct {
	User  string
	Next  string
	Error string
}

type navItem struct {
	Key, Label, Href string
}

var nav = []navItem{
	{"health", "Health", prefix + "health"},
	{"lot", "LoT", prefix + "lot"},
	{"connectors", "Connectors", prefix + "connectors"},
	{"clients", "Clients", prefix + "clients"},
	{"users", "Users", prefix + "users"},
}

// nextTheme is what the theme button switches to: system colours, then
// dark, then light.
func nextTheme(t string) (value, label string) {
	switch t {
	case "auto":
		return "dark", "Theme: system"
	case "dark":
		return "light", "Theme: dark"
	}
	return "auto", "Theme: light"
}
