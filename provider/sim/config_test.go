package sim

import (
	"path/filepath"
	"testing"
	"time"
)

const faultsDir = "../../testdata/faults"

func TestLoadConfigExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(faultsDir, "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("example fault files: %v %v", files, err)
	}
	for _, f := range files {
		cfg, err := LoadConfig(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(cfg.Faults) == 0 {
			t.Errorf("%s: no faults", f)
		}
		s := New(cfg)
		if err := s.Start(""); err != nil {
			t.Errorf("%s: Start: %v", f, err)
		}
		s.Close()
	}
	cfg, err := LoadConfig(filepath.Join(faultsDir, "flaky-stream.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantFault := Fault{Endpoint: EndpointResponsesStream, Requests: []int{1}, Kind: FaultSilence, AfterEvents: 3, Duration: 2 * time.Second}
	if cfg.Seed != 42 || cfg.Tokens != 200 || cfg.TokensPerSecond != 80 || cfg.Keepalive != 500*time.Millisecond ||
		len(cfg.Faults) != 4 || cfg.Faults[3].Duration != wantFault.Duration || cfg.Faults[3].Endpoint != wantFault.Endpoint {
		t.Fatalf("cfg = %+v", cfg)
	}
	rl, err := LoadConfig(filepath.Join(faultsDir, "rate-limited.yaml"))
	if err != nil || rl.Faults[0].RetryAfter != "2" || rl.Faults[0].Status != 429 || rl.Faults[0].Times != 1 {
		t.Fatalf("%+v %v", rl, err)
	}
}

func TestAddFaultPanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	New(Config{}).AddFault(Fault{Kind: "nope"})
}

func TestStartRejectsInvalidFaults(t *testing.T) {
	s := New(Config{Faults: []Fault{{Kind: FaultStatus, Status: 200}}})
	defer s.Close()
	if err := s.Start(""); err == nil {
		t.Fatal("invalid fault accepted")
	}
}
