package provider

// EstimateTokens is noderun's one estimate of the tokens in text that no
// provider counted: about four bytes a token, rounded up. The runner counts
// a crash-resumed attempt's journaled output with it, the simulator its
// prompts, and the recovery accounting (noderun diagnose) the attempts that
// journaled no usage: one rule, so that their figures agree.
func EstimateTokens(text string) int { return (len(text) + 3) / 4 }
