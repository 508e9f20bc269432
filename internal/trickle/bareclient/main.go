// Command bareclient is the yardstick of noderun's cost at the pace real
// streams trickle (issue 45; internal/trickle's BenchmarkTrickle): a client
// written on the standard library alone that reads N chat completion streams
// at once from one server, as a careful program with no journal would. It
// decodes every event with encoding/json, keeps each answer in memory, and
// counts a stream only when it ended on terminal evidence (a finish_reason
// and [DONE]). It prints one line: streams, bytes and failures.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

func main() {
	base := flag.String("base-url", "", "the server's base URL (…/v1)")
	n := flag.Int("n", 1000, "streams at once")
	model := flag.String("model", "sim", "model")
	flag.Parse()
	if *base == "" {
		fmt.Fprintln(os.Stderr, "bareclient: --base-url is required")
		os.Exit(2)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = *n
	client := &http.Client{Transport: tr}
	var bytesRead, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range *n {
		wg.Go(func() {
			out, err := stream(context.Background(), client, *base, *model, fmt.Sprintf("n%05d", i))
			if err != nil {
				if failed.Add(1) == 1 {
					fmt.Fprintln(os.Stderr, "bareclient:", err)
				}
				return
			}
			bytesRead.Add(int64(len(out)))
		})
	}
	wg.Wait()
	fmt.Printf("streams %d bytes %d failed %d\n", *n, bytesRead.Load(), failed.Load())
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// stream reads one streamed answer to its end.
func stream(ctx context.Context, c *http.Client, base, model, node string) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "fan out"}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Noderun-Node", node)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", node, resp.Status)
	}
	var out strings.Builder
	finished := false
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return "", fmt.Errorf("%s: stream ended before [DONE]: %w", node, err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			if !finished {
				return "", fmt.Errorf("%s: [DONE] without a finish_reason", node)
			}
			return out.String(), nil
		}
		var ch chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return "", fmt.Errorf("%s: %w", node, err)
		}
		for _, c := range ch.Choices {
			out.WriteString(c.Delta.Content)
			finished = finished || c.FinishReason != nil
		}
	}
}
