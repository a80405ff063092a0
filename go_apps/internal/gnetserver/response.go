package gnetserver

import (
	"net/http"
	"strconv"

	"polyperf/go_apps/internal/api"
)

// frame is how a request wants its answer framed.
type frame struct {
	keepAlive bool // false: send "Connection: close" (and close after)
	http10    bool // a kept-alive HTTP/1.0 connection must be told so
	head      bool // HEAD: headers only, Content-Length of the GET body
}

// appendResponse appends one complete HTTP/1.1 answer to dst.
func (s *Server) appendResponse(dst []byte, date string, r api.Response, f frame) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, ' ')
	dst = append(dst, http.StatusText(r.Status)...)
	dst = append(dst, "\r\nServer: "...)
	dst = append(dst, s.cfg.AppName...)
	dst = append(dst, "\r\nDate: "...)
	dst = append(dst, date...)
	dst = append(dst, "\r\nContent-Type: "+api.ContentType+"\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(r.Body)), 10)
	if r.Allow != "" {
		dst = append(dst, "\r\nAllow: "...)
		dst = append(dst, r.Allow...)
	}
	switch {
	case !f.keepAlive:
		dst = append(dst, "\r\nConnection: close"...)
	case f.http10:
		dst = append(dst, "\r\nConnection: keep-alive"...)
	}
	dst = append(dst, "\r\n\r\n"...)
	if !f.head {
		dst = append(dst, r.Body...)
	}
	return dst
}
