package diagnostics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func TestClassify(t *testing.T) {
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readReset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name   string
		err    error
		class  Class
		status int
	}{
		{"nil", nil, ClassNone, 0},
		{"clean close without terminal event", fmt.Errorf("chat: %w", ErrDisconnected), ClassDisconnect, 0},
		{"io.EOF", io.EOF, ClassDisconnect, 0},
		{"unexpected EOF", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), ClassDisconnect, 0},
		{"reset", readReset, ClassDisconnect, 0},
		{"broken pipe", syscall.EPIPE, ClassDisconnect, 0},
		{"idle timeout", fmt.Errorf("stream: %w", ErrIdleTimeout), ClassDisconnect, 0},
		{"http2 stream error", errors.New("stream error: stream ID 3; INTERNAL_ERROR; received from peer"), ClassDisconnect, 0},
		{"connection refused", dialRefused, ClassConnect, 0},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), ClassCanceled, 0},
		{"deadline", context.DeadlineExceeded, ClassDisconnect, 0},
		{"stuck", fmt.Errorf("resp_1: %w", ErrStuck), ClassStuck, 0},
		{"429", &openai.APIError{HTTPStatusCode: 429, Message: "slow down"}, ClassRateLimited, 429},
		{"500", &openai.APIError{HTTPStatusCode: 500}, ClassServer, 500},
		{"502", &openai.APIError{HTTPStatusCode: 502}, ClassDisconnect, 502},
		{"503", &openai.RequestError{HTTPStatusCode: 503, Err: errors.New("unavailable")}, ClassDisconnect, 503},
		{"504", &openai.APIError{HTTPStatusCode: 504}, ClassDisconnect, 504},
		{"400", &openai.APIError{HTTPStatusCode: 400}, ClassDeterministic, 400},
		{"401", &openai.APIError{HTTPStatusCode: 401, Message: "bad key"}, ClassDeterministic, 401},
		{"403", &openai.APIError{HTTPStatusCode: 403}, ClassDeterministic, 403},
		{"404", &openai.APIError{HTTPStatusCode: 404}, ClassDeterministic, 404},
		{"422", &openai.APIError{HTTPStatusCode: 422}, ClassDeterministic, 422},
		{"context length in a 500", &openai.APIError{HTTPStatusCode: 500, Message: "This model's maximum context length is 8192 tokens"}, ClassDeterministic, 500},
		{"adapter knows better", fmt.Errorf("wrapped: %w", &Error{Class: ClassRateLimited, Status: 429, RetryAfter: time.Second, Err: errors.New("x")}), ClassRateLimited, 429},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Classify(c.err)
			if got.Class != c.class || got.Status != c.status {
				t.Errorf("Classify(%v) = %s/%d, want %s/%d", c.err, got.Class, got.Status, c.class, c.status)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"-1", 0},
		{"soon", 0},
		{"Sun, 29 Nov 2026 12:00:30 GMT", 30 * time.Second},
		{"Sun, 29 Nov 2026 11:59:00 GMT", 0}, // in the past
	}
	for _, c := range cases {
		if got := ParseRetryAfter(c.in, now); got != c.want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestCodesAreUniqueAndStable(t *testing.T) {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, c := range Codes() {
		if ids[c.ID] || names[c.Name] {
			t.Errorf("duplicate code %s", c)
		}
		ids[c.ID], names[c.Name] = true, true
		if got, ok := Lookup(c.Name); !ok || got != c {
			t.Errorf("Lookup(%q) = %v", c.Name, got)
		}
	}
}
