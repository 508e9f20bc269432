package sim

import (
	"github.com/noderun/noderun/provider/sim/simconfig"
	"go.yaml.in/yaml/v3"
)

// The configuration types live in package simconfig, a leaf without network
// code, so that the graph language can decode a `sim:` block without
// linking this server; they are aliased here so that a server's callers
// need only this package.
type (
	// Config is how the simulator generates and fails: simconfig.Config.
	Config = simconfig.Config
	// ConfigError is a config problem at a line of the YAML source:
	// simconfig.ConfigError.
	ConfigError = simconfig.ConfigError
	// ConfigErrors are every problem of one config file, one a line:
	// simconfig.ConfigErrors.
	ConfigErrors = simconfig.ConfigErrors
	// Fault is one scripted failure: simconfig.Fault.
	Fault = simconfig.Fault
	// FaultKind is what a fault does: simconfig.FaultKind.
	FaultKind = simconfig.FaultKind
	// Limits makes the simulator answer like a rate-limited account:
	// simconfig.Limits.
	Limits = simconfig.Limits
)

// DefaultTokens is the output length when neither the request nor the
// Config says otherwise.
const DefaultTokens = simconfig.DefaultTokens

// DefaultLimitWindow is the period of Limits that set none.
const DefaultLimitWindow = simconfig.DefaultLimitWindow

// Fault kinds; see simconfig.FaultKind for what each does.
const (
	FaultClose      = simconfig.FaultClose
	FaultReset      = simconfig.FaultReset
	FaultCut        = simconfig.FaultCut
	FaultSilence    = simconfig.FaultSilence
	FaultStatus     = simconfig.FaultStatus
	FaultQueued     = simconfig.FaultQueued
	FaultRefuse     = simconfig.FaultRefuse
	FaultOutage     = simconfig.FaultOutage
	FaultErrorEvent = simconfig.FaultErrorEvent
)

// Endpoint names, as used in Stats.Requests and Fault.Endpoint.
const (
	EndpointChat               = simconfig.EndpointChat
	EndpointResponsesCreate    = simconfig.EndpointResponsesCreate
	EndpointResponsesGet       = simconfig.EndpointResponsesGet
	EndpointResponsesStream    = simconfig.EndpointResponsesStream
	EndpointResponsesCancel    = simconfig.EndpointResponsesCancel
	EndpointModels             = simconfig.EndpointModels
	EndpointMessages           = simconfig.EndpointMessages
	EndpointGeminiStream       = simconfig.EndpointGeminiStream
	EndpointGeminiGenerate     = simconfig.EndpointGeminiGenerate
	EndpointInteractionsCreate = simconfig.EndpointInteractionsCreate
	EndpointInteractionsGet    = simconfig.EndpointInteractionsGet
	EndpointInteractionsStream = simconfig.EndpointInteractionsStream
	EndpointInteractionsCancel = simconfig.EndpointInteractionsCancel
)

// Continuation forms the simulator accepts (Config.Continuation); see
// continue.go for what each means on the wire.
const (
	FormPrefix        = simconfig.FormPrefix
	FormContinueFinal = simconfig.FormContinueFinal
	FormAssistantLast = simconfig.FormAssistantLast
)

// LoadConfig reads a simulator config from a YAML file: simconfig.LoadConfig.
func LoadConfig(path string) (Config, error) { return simconfig.LoadConfig(path) }

// ParseConfig is LoadConfig on bytes: simconfig.ParseConfig.
func ParseConfig(data []byte) (Config, error) { return simconfig.ParseConfig(data) }

// DecodeConfig decodes a config from a YAML node: simconfig.DecodeConfig.
func DecodeConfig(n *yaml.Node) (Config, error) { return simconfig.DecodeConfig(n) }

// DecodeFault decodes one fault from a YAML mapping: simconfig.DecodeFault.
func DecodeFault(n *yaml.Node) (Fault, error) { return simconfig.DecodeFault(n) }
