package webui

import (
	"net/http"
	"strings"
)

// safeNext keeps a post-login redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, prefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return prefix + "health"
	}
	return next
}

func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	if c.setupPending() {
		http.Redirect(w, r, prefix+"setup", http.StatusSeeOther)
		return
	}
	if ss, _ := c.current(r); ss != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	nonce := preNonce(w, r)
	c.render(w, r, http.StatusOK, LoginPage(c.loginFrame(r, nonce), loginForm{Next: r.URL.Query().Get("next")}))
}

func (c *Console) loginFrame(r *http.Request, nonce string) frame {
	f := c.frame(&req{theme: themeOf(r)}, "Log in", "")
	f.CSRF = c.sessions.preToken(nonce)
	return f
}

// postLogin checks a broker user's password. Failures count against the
// source address: after Throttle's burst the address is refused for a
// while, whatever the password.
func (c *Console) postLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if c.setupPending() {
		http.Redirect(w, r, prefix+"setup", http.StatusSeeOther)
		return
	}
	ck, err := r.Cookie(preCookie)
	if err != nil || !tokenOK(r, c.sessions.preToken(ck.Value)) {
		c.log.Warn("login without a valid CSRF token refused", "remote", clientIP(r))
		http.Error(w, "This form has expired or did not come from the console (CSRF token missing or wrong). Reload the page and try again.", http.StatusForbidden)
		return
	}
	f := loginForm{User: strings.TrimSpace(r.PostFormValue("username")), Next: r.PostFormValue("next")}
	ip := clientIP(r)
	fr := c.loginFrame(r, ck.Value)
	if c.throttle.Blocked(ip) {
		f.Error = "Too many failed logins from this address. Wait a few minutes, then try again."
		c.render(w, r, http.StatusTooManyRequests, LoginPage(fr, f))
		return
	}
	u, err := c.o.Users.Verify(f.User, []byte(r.PostFormValue("password")))
	if err != nil {
		if c.throttle.Fail(ip) {
			c.log.Warn("console login failures from one address: throttled", "remote", ip)
		}
		c.log.Info("console login failed", "user", f.User, "remote", ip)
		f.Error = "Wrong user name or password."
		c.render(w, r, http.StatusUnauthorized, LoginPage(fr, f))
		return
	}
	c.startSession(w, r, u.Name)
	c.log.Info("console login", "user", u.Name, "remote", ip)
	http.Redirect(w, r, safeNext(f.Next), http.StatusSeeOther)
}

// startSession logs user in with a new session identifier (a session
// cookie planted before login is never promoted).
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, user string) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.remove(ck.Value)
	}
	ss := c.sessions.create(user)
	setCookie(w, r, sessionCookie, ss.id, 0)
	setCookie(w, r, preCookie, "", -1)
}

func (c *Console) postLogout(w http.ResponseWriter, r *http.Request, rq *req) {
	c.sessions.remove(rq.sess.id)
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, prefix+"login", http.StatusSeeOther)
}
