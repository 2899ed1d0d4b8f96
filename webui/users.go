package webui

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// userRow is one row of the users page.
type userRow struct {
	Name  string
	Admin bool
}

type usersView struct {
	Rows    []userRow
	Flash   string
	Error   string
	Me      string
	NewName string
}

func (c *Console) usersView(me string) usersView {
	v := usersView{Me: me}
	names := c.o.Users.Names()
	slices.Sort(names)
	for _, n := range names {
		u, ok := c.o.Users.Lookup(n)
		if ok {
			v.Rows = append(v.Rows, userRow{Name: u.Name, Admin: u.Admin})
		}
	}
	return v
}

func (c *Console) serveUsers(w http.ResponseWriter, r *http.Request, rq *req) {
	v := c.usersView(rq.user.Name)
	v.Flash = r.URL.Query().Get("done")
	c.renderUsers(w, r, rq, http.StatusOK, v)
}

func (c *Console) renderUsers(w http.ResponseWriter, r *http.Request, rq *req, status int, v usersView) {
	f := c.frame(rq, "Users", "users")
	f.Back = prefix + "users"
	c.render(w, r, status, UsersPage(f, v))
}

// quoteArg quotes a command argument for the command interface's
// tokenizer (double quotes, backslash escapes).
func quoteArg(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// userCommand runs a user command and shows its outcome on the users page.
func (c *Console) userCommand(w http.ResponseWriter, r *http.Request, rq *req, payload, done string) bool {
	reply, err := c.o.Commands.Command(r.Context(), rq.user.Name, payload)
	msg := ""
	switch {
	case err != nil:
		msg = "The node did not answer: " + err.Error()
	case !reply.Success:
		msg = reply.Message
	}
	if msg != "" {
		v := c.usersView(rq.user.Name)
		v.Error = msg
		c.renderUsers(w, r, rq, http.StatusUnprocessableEntity, v)
		return false
	}
	http.Redirect(w, r, prefix+"users?done="+urlQuery(done), http.StatusSeeOther)
	return true
}

func (c *Console) postAddUser(w http.ResponseWriter, r *http.Request, rq *req) {
	name, pw := strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("password")
	if msg := passwordProblem(pw, r.PostFormValue("password2")); msg != "" || name == "" {
		if name == "" {
			msg = "Enter a user name."
		}
		v := c.usersView(rq.user.Name)
		v.Error, v.NewName = msg, name
		c.renderUsers(w, r, rq, http.StatusUnprocessableEntity, v)
		return
	}
	c.userCommand(w, r, rq, "-addUser "+quoteArg(name)+" "+quoteArg(pw), "User "+name+" added.")
}

func (c *Console) postRemoveUser(w http.ResponseWriter, r *http.Request, rq *req) {
	name := r.PostFormValue("name")
	if name == rq.user.Name {
		v := c.usersView(rq.user.Name)
		v.Error = "You cannot remove the user you are logged in as."
		c.renderUsers(w, r, rq, http.StatusUnprocessableEntity, v)
		return
	}
	if c.userCommand(w, r, rq, "-removeUser "+quoteArg(name), "User "+name+" removed.") {
		c.sessions.removeUser(name, "")
	}
}

// passwordSetter is the user store's optional capability to set a
// password directly: a user changes their own password after giving the
// current one, which the command interface's rules would refuse to
// someone who is not an administrator.
type passwordSetter interface {
	SetPassword(name, password string) error
}

// postPassword changes a password: any user their own (with the current
// one), an administrator anyone's through the command interface.
func (c *Console) postPassword(w http.ResponseWriter, r *http.Request, rq *req) {
	name, pw := r.PostFormValue("name"), r.PostFormValue("password")
	if name != rq.user.Name && !rq.admin() {
		http.Error(w, "Only an administrator may change another user's password.", http.StatusForbidden)
		return
	}
	fail := func(msg string) {
		v := c.usersView(rq.user.Name)
		v.Error = msg
		c.renderUsers(w, r, rq, http.StatusUnprocessableEntity, v)
	}
	if msg := passwordProblem(pw, r.PostFormValue("password2")); msg != "" {
		fail(msg)
		return
	}
	if name == rq.user.Name {
		if _, err := c.o.Users.Verify(name, []byte(r.PostFormValue("current"))); err != nil {
			fail("Your current password is wrong.")
			return
		}
		ps, ok := c.o.Users.(passwordSetter)
		if !ok {
			fail("This node cannot change passwords from the console.")
			return
		}
		if err := ps.SetPassword(name, pw); err != nil {
			fail("Password not changed: " + err.Error())
			return
		}
		c.sessions.removeUser(name, rq.sess.id)
		c.log.Info("password changed from the console", "user", name)
		http.Redirect(w, r, prefix+"users?done="+urlQuery("Password of "+name+" changed."), http.StatusSeeOther)
		return
	}
	if c.userCommand(w, r, rq, "-changeUserPassword "+quoteArg(name)+" "+quoteArg(pw), "Password of "+name+" changed.") {
		c.sessions.removeUser(name, rq.sess.id)
	}
}

// minPassword is the shortest password the console sets.
const minPassword = 8

func passwordProblem(pw, again string) string {
	switch {
	case len(pw) < minPassword:
		return "The password must have at least 8 characters."
	case pw != again:
		return "The two passwords differ: type the same password twice."
	}
	return ""
}

func urlQuery(s string) string { return url.QueryEscape(s) }

// serveRemoveUser asks before a user is removed.
func (c *Console) serveRemoveUser(w http.ResponseWriter, r *http.Request, rq *req) {
	name := r.URL.Query().Get("name")
	f := c.frame(rq, "Remove "+name, "users")
	c.render(w, r, http.StatusOK, ConfirmPage(f, confirm{Title: "Remove user " + name,
		Question: "Remove " + name + "? They can no longer log in over MQTT or here; their console sessions end.",
		Action:   prefix + "users/remove", Fields: map[string]string{"name": name}, Yes: "Remove " + name, Back: prefix + "users"}))
}
