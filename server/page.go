package server

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The page is a few static files, embedded: no asset comes from the
// network, so it works offline and behind any proxy. index.html is a
// template for the one value the server gives it: the write token, which
// only a page of this origin can read (no CORS), and which every write
// needs.
//
//go:embed page
var pageFS embed.FS

var indexTmpl = template.Must(template.ParseFS(pageFS, "page/index.html"))

// pageCSP lets the page run its own script and reach its own origin only.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// pageRoutes serves the web page and the login form.
func (s *Server) pageRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /{$}", s.index)
	m.HandleFunc("GET /runs/{run}", s.index)
	m.HandleFunc("GET /temporal/runs/{run}", s.index)
	assets, _ := fs.Sub(pageFS, "page")
	files := http.FileServerFS(assets)
	m.Handle("GET /assets/", http.StripPrefix("/assets/", noIndex(files)))
	m.HandleFunc("GET /login", s.login)
	m.HandleFunc("POST /login", s.login)
}

// noIndex refuses the template and directory listings among the assets.
func noIndex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") || strings.HasSuffix(r.URL.Path, ".html") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	if err := indexTmpl.Execute(&b, struct{ WriteToken string }{s.writeToken}); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	_, _ = w.Write(b.Bytes())
}

var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>noderun: sign in</title><link rel="stylesheet" href="/assets/app.css"></head>
<body><main class="login"><h1>noderun</h1>
<form method="post" action="/login">
<label for="token">This server needs its token</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Sign in</button>
{{if .Wrong}}<p class="error" role="alert">That is not the token.</p>{{end}}
</form><p class="hint">The token is the value of the variable that <code>noderun serve --token-env NAME</code> names.</p></main></body></html>
`))

// login shows the form, and on POST with the right token sets the cookie
// that carries it and goes on to the page asked for.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if u, err := url.Parse(next); err != nil || next == "" || u.IsAbs() || u.Host != "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/" // only a path of this server: no open redirect
	}
	wrong := false
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if sameOrigin(r) == nil && s.opts.Token != "" && sameToken(r.PostFormValue("token"), s.opts.Token) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.opts.Token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int((30 * 24 * time.Hour).Seconds())})
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		wrong = true
	}
	if s.opts.Token == "" || (r.Method == http.MethodGet && s.authorized(r)) {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'")
	if wrong {
		w.WriteHeader(http.StatusUnauthorized)
	}
	_ = loginTmpl.Execute(w, struct {
		Next  string
		Wrong bool
	}{next, wrong})
}
