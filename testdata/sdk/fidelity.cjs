// Reads the simulator with the official JavaScript SDKs, as their users
// would: node fidelity.cjs MODE BASE_URL [API_VERSION] prints one JSON line
// of what the SDK gave back, or exits 1 with the SDK's error. API_VERSION
// pins @google/genai's path version; without it the SDK's default (v1 in
// 3.3.0) is used. Run by
// provider/sim/sdk_test.go with NODE_PATH at .tools/node_modules.
'use strict';
const [mode, base, apiVersion] = process.argv.slice(2);

async function anthropic() {
  const Anthropic = require('@anthropic-ai/sdk');
  const client = new (Anthropic.default || Anthropic)({ apiKey: 'sk-ant-sim', baseURL: base, maxRetries: 0 });
  if (mode === 'anthropic-stream') {
    const stream = client.messages.stream({ model: 'claude-sim', max_tokens: 256, messages: [{ role: 'user', content: 'fidelity' }] });
    let pings = 0;
    stream.on('streamEvent', (ev) => { if (ev.type === 'ping') pings++; });
    const msg = await stream.finalMessage();
    return { text: msg.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), stop_reason: msg.stop_reason, usage: msg.usage };
  }
  try {
    await client.messages.create({ model: 'claude-sim', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] });
    return { status: 200 };
  } catch (e) {
    return { status: e.status, type: e.error && e.error.error && e.error.error.type, name: e.constructor.name };
  }
}

async function genai() {
  const { GoogleGenAI } = require('@google/genai');
  const httpOptions = { baseUrl: base };
  if (apiVersion) httpOptions.apiVersion = apiVersion; // v1beta: the path the API reference documents (noderun's default)
  const ai = new GoogleGenAI({ apiKey: 'sim-key', httpOptions });
  const params = { model: 'sim', input: 'fidelity', stream: true, background: true, store: true };
  if (mode === 'genai-stream') {
    const stream = await ai.interactions.create(params);
    let text = '', id = '', last = '', types = {};
    for await (const ev of stream) {
      types[ev.event_type] = (types[ev.event_type] || 0) + 1;
      if (ev.interaction && ev.interaction.id) id = ev.interaction.id;
      if (ev.delta && ev.delta.type === 'text' && typeof ev.delta.text === 'string') text += ev.delta.text;
      last = ev.event_type;
      if (ev.interaction && ev.interaction.status) last += ':' + ev.interaction.status;
    }
    const got = await ai.interactions.get(id);
    const out = (got.steps || []).filter((s) => s.type === 'model_output').flatMap((s) => s.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
    return { text, id, last, status: got.status, steps: (got.steps || []).map((s) => s.type), stepsText: out, usage: got.usage, types };
  }
  try {
    await ai.interactions.create(params);
    return { status: 200 };
  } catch (e) {
    return { status: e.status, message: e.message, name: e.constructor.name };
  }
}

(mode.startsWith('anthropic') ? anthropic() : genai()).then(
  (r) => { process.stdout.write(JSON.stringify(r) + '\n'); },
  (e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
