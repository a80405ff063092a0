// Package devices is the benchmark's domain: the fixed device list served by
// GET /api/devices and the validation of POST bodies. Both servers share it so
// their JSON is byte-for-byte identical.
package devices

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Field limits match the varchar sizes of the devices table.
const (
	MaxMACLen      = 17
	MaxFirmwareLen = 10
)

// Device is one row of the devices table.
type Device struct {
	ID       int64  `json:"id"`
	MAC      string `json:"mac"`
	Firmware string `json:"firmware"`
}

// New is a validated POST body, not yet stored.
type New struct {
	MAC      string
	Firmware string
}

var fixed = []Device{
	{1, "5F-33-CC-1F-43-82", "2.1.6"},
	{2, "EF-2B-C4-F5-D6-34", "2.1.5"},
	{3, "62-46-13-B7-B3-A1", "3.0.0"},
	{4, "96-A8-DE-5B-77-14", "1.0.1"},
	{5, "7E-3B-62-A6-09-12", "3.5.6"},
}

// listJSON is serialised once: GET /api/devices is a hot path of the benchmark.
var listJSON = mustMarshal(fixed)

// ListJSON returns the serialised fixed list. Callers must not modify it.
func ListJSON() []byte { return listJSON }

// JSON serialises a stored device for the 201 answer.
func (d Device) JSON() []byte { return mustMarshal(d) }

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("devices: marshal %T: %v", v, err)) // only fixed, string-only types reach here
	}
	return b
}

// ValidationError is a client mistake; its text is the short reason sent back with 400.
type ValidationError string

func (e ValidationError) Error() string { return string(e) }

// Parse validates a POST body: a JSON object whose "mac" and "firmware" are
// non-empty strings within the column sizes. Unknown fields are ignored.
func Parse(body []byte) (New, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		if json.Valid(body) {
			return New{}, ValidationError("body must be a JSON object")
		}
		return New{}, ValidationError("malformed JSON")
	}
	if fields == nil { // the body was `null`
		return New{}, ValidationError("body must be a JSON object")
	}
	mac, err := stringField(fields, "mac", MaxMACLen)
	if err != nil {
		return New{}, err
	}
	fw, err := stringField(fields, "firmware", MaxFirmwareLen)
	if err != nil {
		return New{}, err
	}
	return New{MAC: mac, Firmware: fw}, nil
}

func stringField(fields map[string]json.RawMessage, name string, maxLen int) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", ValidationError("missing field " + name)
	}
	var s string
	// `null` unmarshals into a string without error, so reject it explicitly.
	if bytes.Equal(raw, []byte("null")) || json.Unmarshal(raw, &s) != nil {
		return "", ValidationError(name + " must be a string")
	}
	switch {
	case s == "":
		return "", ValidationError(name + " must not be empty")
	case utf8.RuneCountInString(s) > maxLen: // varchar(n) counts characters, not bytes
		return "", ValidationError(fmt.Sprintf("%s longer than %d characters", name, maxLen))
	case strings.IndexByte(s, 0) >= 0: // PostgreSQL text cannot hold NUL
		return "", ValidationError(name + " must not contain NUL")
	}
	return s, nil
}
