// OpenAI's official Node.js client asks tinylm for a completion, then a streamed one (README.md, Services).
import OpenAI from "openai";
const client = new OpenAI(); // OPENAI_BASE_URL: a node's /openai/v1; OPENAI_API_KEY: the service's key
const messages = [{ role: "user", content: "Is not Fire a Body heated so hot as to emit Light?" }];
const answer = await client.chat.completions.create({ model: "tinylm", messages, max_tokens: 24 });
console.log(answer.choices[0].message.content, answer.usage);
const stream = await client.chat.completions.create({ model: "tinylm", messages, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
  if (chunk.usage) console.log("\n", chunk.usage);
}
