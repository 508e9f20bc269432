package sim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The input that Text is computed from is the request's prompt: the text of
// the last message whose role is "user". System and developer messages,
// instructions, tools and earlier turns are deliberately left out:
//
//   - Harnesses such as Codex CLI wrap the prompt in run-specific context (the
//     working directory, the date, message ids, a long developer prompt), so
//     only the user's last message is something a test can know in advance.
//   - The same node therefore produces the same text whether it is sent over
//     Chat Completions, the Responses API or through Codex, which lets a test
//     swap adapters and compare outputs byte for byte.
//
// A message's text is its content when content is a string, else its text
// parts (type "text", "input_text" or "output_text") joined with "\n".

// ChatInput derives the input of a Chat Completions request body: the content
// of the last message with role "user" ("" when there is none).
func ChatInput(body []byte) (string, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", fmt.Errorf("chat request: %w", err)
	}
	return req.input(), nil
}

// ResponsesInput derives the input of a Responses API request body: `input`
// when it is a string, else the text of the last input item with role "user"
// ("" when there is none). `instructions` is not part of it (see above).
func ResponsesInput(body []byte) (string, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", fmt.Errorf("responses request: %w", err)
	}
	return req.prompt()
}

// content is a message content: a string or an array of typed parts.
type content json.RawMessage

func (c *content) UnmarshalJSON(b []byte) error {
	*c = append((*c)[:0], b...)
	return nil
}

// text returns the content's text; ok is false when the shape is unknown.
func (c content) text() (string, bool) {
	raw := []byte(c)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), true
}

// message is a chat message or a Responses input item; unknown fields and
// item types (tool calls, reasoning items) are ignored.
type message struct {
	Type    string  `json:"type"`
	Role    string  `json:"role"`
	Content content `json:"content"`
	// Prefix marks a partial assistant answer to continue (continue.go).
	Prefix *bool `json:"prefix"`
}

func lastUserText(msgs []message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != "user" || (m.Type != "" && m.Type != "message") {
			continue
		}
		if t, ok := m.Content.text(); ok {
			return t
		}
	}
	return ""
}
