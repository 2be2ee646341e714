package server

import (
	"log/slog"
	"net/http"
	"time"
)

// Connection timeouts of the HTTP server (see HTTPServer).
const (
	// ReadHeaderTimeout bounds how long a client may take to send the request line and headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds how long a client may take to send a whole request, body included. A
	// body still arriving then is answered 408 (or, if nothing can be written, the connection is
	// closed), logged as a warning: a slow client is not a server error.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds handling plus writing the response.
	WriteTimeout = 60 * time.Second
	// IdleTimeout closes keep-alive connections that send no new request for this long.
	IdleTimeout = 120 * time.Second
	// RequestTimeout bounds the work a request may do, database waits included: a request still
	// waiting for a database connection then (the pool exhausted by a database that stopped
	// answering) gets 503. PostgreSQL connection attempts give up sooner (connect_timeout=2).
	RequestTimeout = 15 * time.Second
)

// HTTPServer returns the http.Server that serves the app, with the connection timeouts above
// and net/http's own errors logged at warn level. Serve it on Listener(ln) so that requests
// net/http refuses by itself still get problem bodies.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}
