// A webhook receiver for Gatehouse's end-to-end tests: it verifies every delivery with the
// Standard Webhooks reference library (npm standardwebhooks) and prints one JSON line per
// request to stdout: {"id", "type", "verified": [indexes of the secrets that verify it]}.
// It answers 204 when a secret verifies the delivery, 400 otherwise.
//
// Usage: node webhook-receiver.mjs <port | fd:N> <whsec_…> [<whsec_…> …]
// With fd:N it serves the listening socket it inherited as file descriptor N (the tests hold
// the port between receivers).
// RECEIVER_DELAY_MS delays each answer (a slow receiver).
// The first line it prints is {"listening": <port>}.
import http from "node:http";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Webhook } = require("standardwebhooks");

const [port, ...secrets] = process.argv.slice(2);
const hooks = secrets.map((s) => new Webhook(s));
const delay = Number(process.env.RECEIVER_DELAY_MS ?? 0);

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const verified = [];
    let event = null;
    hooks.forEach((h, i) => {
      try {
        event = h.verify(body, req.headers);
        verified.push(i);
      } catch {
        // not signed with this secret
      }
    });
    process.stdout.write(JSON.stringify({ id: req.headers["webhook-id"] ?? "", type: event?.type ?? "", verified }) + "\n");
    setTimeout(() => {
      res.writeHead(verified.length > 0 ? 204 : 400);
      res.end();
    }, delay);
  });
});
const ready = () => process.stdout.write(JSON.stringify({ listening: server.address().port }) + "\n");
if (port.startsWith("fd:")) {
  server.listen({ fd: Number(port.slice(3)) }, ready);
} else {
  server.listen(Number(port), "127.0.0.1", ready);
}
