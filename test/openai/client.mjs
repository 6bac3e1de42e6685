// Runs OpenAI's official Node.js client against a gpunet node's OpenAI
// endpoint: one chat completion, one streamed chat completion and one
// request for a model nobody serves, and prints what came back as one JSON
// object on standard output.
//
//   node client.mjs BASE_URL KEY MODEL
//
// BASE_URL is the node's {api}/openai/v1; KEY a service key (or any text for
// a public service); MODEL a model a service declares. Each argument may
// instead come from OPENAI_BASE_URL, OPENAI_API_KEY and GPUNET_MODEL. The
// exit status is 0 when all three requests got an answer (the third is
// meant to fail with 404; its error is reported, not thrown).
import OpenAI from "openai";

const [baseURL, apiKey, model] = [
  process.argv[2] ?? process.env.OPENAI_BASE_URL,
  process.argv[3] ?? process.env.OPENAI_API_KEY,
  process.argv[4] ?? process.env.GPUNET_MODEL,
];
if (!baseURL || !apiKey || !model) {
  console.error("usage: node client.mjs BASE_URL KEY MODEL (or OPENAI_BASE_URL, OPENAI_API_KEY, GPUNET_MODEL)");
  process.exit(2);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const messages = [{ role: "user", content: "Say hello to the network." }];

const whole = await client.chat.completions.create({ model, messages, max_tokens: 16 });

const stream = await client.chat.completions.create({
  model,
  messages,
  max_tokens: 16,
  stream: true,
  stream_options: { include_usage: true },
});
let content = "";
let chunks = 0;
let usage = null;
let firstChunkMs = null;
const start = Date.now();
for await (const chunk of stream) {
  chunks++;
  if (firstChunkMs === null) firstChunkMs = Date.now() - start;
  content += chunk.choices[0]?.delta?.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}

let missing = null;
try {
  await client.chat.completions.create({ model: "gpunet-no-such-model", messages });
} catch (e) {
  missing = { status: e.status ?? null, code: e.code ?? null, type: e.type ?? null, message: e.message };
}

const models = [];
for await (const m of client.models.list()) models.push({ id: m.id, owned_by: m.owned_by });

console.log(
  JSON.stringify({
    nonStreamed: { content: whole.choices[0]?.message?.content ?? null, usage: whole.usage ?? null },
    streamed: { content, usage, chunks, firstChunkMs },
    missingModel: missing,
    models,
  }),
);
