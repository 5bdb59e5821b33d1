// The enrichment bench's lookup service: GET /customers/<id> answers {"id", "name", "tier"} after DELAY_MS.
// Node's event loop serves ~20k requests/s on one core, so the service is not what the bench measures.
// Usage: node bench/lookup_service.js <port> <delay_ms>; prints "listening <port>" when ready.
const http = require("http");
const delay = parseInt(process.argv[3] || "10", 10);
const server = http.createServer((req, res) => {
  setTimeout(() => {
    const id = decodeURIComponent(req.url.split("/").pop());
    const body = JSON.stringify({ id, name: "name-" + id, tier: id.length });
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  }, delay);
});
server.keepAliveTimeout = 60000;
server.listen(parseInt(process.argv[2] || "0", 10), "127.0.0.1", () => {
  console.log("listening " + server.address().port);
});
