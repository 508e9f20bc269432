package simconfig

// Continuation forms the simulator accepts (Config.Continuation), as the
// servers behind them do (docs/providers.md; what each means on the wire is
// in provider/sim's continue.go):
//
//   - prefix: the last message is an assistant message with "prefix": true
//     (DeepSeek's beta chat prefix completion, Mistral).
//   - continue_final_message: the request has "continue_final_message": true
//     and "add_generation_prompt": false (vLLM, SGLang, llama.cpp).
//   - assistant_last: a last assistant message is continued as it is (Ollama,
//     llama.cpp's server).
const (
	FormPrefix        = "prefix"
	FormContinueFinal = "continue_final_message"
	FormAssistantLast = "assistant_last"
	// formNone in Config.Continuation accepts no form.
	formNone = "none"
)

var forms = []string{FormPrefix, FormContinueFinal, FormAssistantLast}
