package devices

import (
	"errors"
	"testing"
)

// The exact bytes the Python harness and the Rust fleet compare against.
const wantList = `[{"id":1,"mac":"5F-33-CC-1F-43-82","firmware":"2.1.6"},{"id":2,"mac":"EF-2B-C4-F5-D6-34","firmware":"2.1.5"},{"id":3,"mac":"62-46-13-B7-B3-A1","firmware":"3.0.0"},{"id":4,"mac":"96-A8-DE-5B-77-14","firmware":"1.0.1"},{"id":5,"mac":"7E-3B-62-A6-09-12","firmware":"3.5.6"}]`

func TestListJSON(t *testing.T) {
	if got := string(ListJSON()); got != wantList {
		t.Fatalf("ListJSON() =\n%s\nwant\n%s", got, wantList)
	}
}

func TestDeviceJSON(t *testing.T) {
	got := string(Device{ID: 42, MAC: "AA", Firmware: "1.0"}.JSON())
	if want := `{"id":42,"mac":"AA","firmware":"1.0"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// A table-driven test like alloccount's TestExtra: the shape is Go's idiom, the cases are this package's.
func TestParse(t *testing.T) {
	tests := []struct {
		body    string
		want    New
		wantErr string
	}{
		{body: `{"mac":"AA-BB","firmware":"1.0"}`, want: New{"AA-BB", "1.0"}},
		{body: ` {"firmware":"1.0","mac":"AA-BB","extra":[1,2]} `, want: New{"AA-BB", "1.0"}},
		{body: `{"mac":"12345678901234567","firmware":"1234567890"}`, want: New{"12345678901234567", "1234567890"}},
		{body: `{"mac":"ÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄ","firmware":"é"}`, want: New{"ÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄ", "é"}},
		{body: ``, wantErr: "malformed JSON"},
		{body: `{"mac":`, wantErr: "malformed JSON"},
		{body: `{"mac":"a","firmware":"b"} x`, wantErr: "malformed JSON"},
		{body: `[]`, wantErr: "body must be a JSON object"},
		{body: `null`, wantErr: "body must be a JSON object"},
		{body: `"str"`, wantErr: "body must be a JSON object"},
		{body: `{"firmware":"1"}`, wantErr: "missing field mac"},
		{body: `{"mac":"a"}`, wantErr: "missing field firmware"},
		{body: `{"mac":1,"firmware":"1"}`, wantErr: "mac must be a string"},
		{body: `{"mac":null,"firmware":"1"}`, wantErr: "mac must be a string"},
		{body: `{"mac":"a","firmware":true}`, wantErr: "firmware must be a string"},
		{body: `{"mac":"","firmware":"1"}`, wantErr: "mac must not be empty"},
		{body: `{"mac":"a","firmware":""}`, wantErr: "firmware must not be empty"},
		{body: `{"mac":"123456789012345678","firmware":"1"}`, wantErr: "mac longer than 17 characters"},
		{body: `{"mac":"a","firmware":"12345678901"}`, wantErr: "firmware longer than 10 characters"},
		{body: `{"mac":"a\u0000","firmware":"1"}`, wantErr: "mac must not contain NUL"},
		{body: `{"MAC":"a","firmware":"1"}`, wantErr: "missing field mac"},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			got, err := Parse([]byte(tc.body))
			if tc.wantErr != "" {
				var ve ValidationError
				if !errors.As(err, &ve) || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want ValidationError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
