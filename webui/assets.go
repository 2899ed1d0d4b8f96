package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// static holds every script, style and font the console uses: a gateway on
// a factory LAN has no internet, so nothing is loaded from anywhere else.
//
//go:embed static
var static embed.FS

// assets maps file names to their fingerprinted names and back. File names
// carry a hash of their content, so they can be cached for a year.
type assets struct {
	hashed map[string]string // "app.css" → "app.1a2b3c4d5e.css"
	byHash map[string]string // "app.1a2b3c4d5e.css" → "app.css"
	files  fs.FS
}

func loadAssets() *assets {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed pattern names the directory
	}
	a := &assets{hashed: map[string]string{}, byHash: map[string]string{}, files: sub}
	fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(p)
		if strings.HasSuffix(p, ".min"+ext) {
			ext = ".min" + ext
		}
		h := strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:5]) + ext
		a.hashed[p], a.byHash[h] = h, p
		return nil
	})
	return a
}

// url returns the address of a static file.
func (a *assets) url(name string) string {
	h, ok := a.hashed[name]
	if !ok {
		panic("webui: no static file " + name) // a typo in a template; the tests render every page
	}
	return prefix + "static/" + h
}

// handler serves fingerprinted names only, cached as immutable.
func (a *assets) handler() http.Handler {
	files := http.FileServerFS(a.files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := a.byHash[strings.TrimPrefix(r.URL.Path, prefix+"static/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}
