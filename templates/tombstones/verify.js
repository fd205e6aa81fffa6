// The browser's own check of a tombstone receipt, independent of the server's word.
//
// It mirrors tombstones/verification.py step by step: the DSSE signature (Ed25519 in WebCrypto), the
// checkpoint's signed note, the RFC 9162 inclusion proof, key compromise, and the consistency of the
// receipt's checkpoint with the log's latest one (and with the latest one this browser saw before).
// It fetches only from this site: the published keys and the log's public endpoints.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const reasons = JSON.parse($("verify-reasons").textContent);
  const bundle = JSON.parse($("verify-bundle").textContent);
  const serverCode = $("server-verdict").dataset.code;
  const box = $("browser-verdict");
  const utf8 = new TextEncoder();
  const MAX_PROOF_HASHES = 64;
  const RECEIPT_FORMAT = "forgetting-ledger-receipt/v1";
  const BUNDLE_FORMAT = "forgetting-ledger-receipts/v1";
  const MAX_BUNDLE_RECEIPTS = 1000;
  const CHECKPOINT = "checkpoint";
  const TOMBSTONE = "tombstone";

  class Fail extends Error {
    constructor(code, detail) { super(code); this.code = code; this.detail = detail || {}; }
  }
  const malformed = (detail) => new Fail("malformed", { detail: detail });

  // ---- bytes ----
  function concat(...parts) {
    const arrays = parts.map((p) => (typeof p === "string" ? utf8.encode(p) : p));
    const out = new Uint8Array(arrays.reduce((n, a) => n + a.length, 0));
    let offset = 0;
    for (const a of arrays) { out.set(a, offset); offset += a.length; }
    return out;
  }
  function equal(a, b) {
    if (!a || !b || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }
  function b64decode(text) {
    if (typeof text !== "string") throw malformed("expected a base64 string");
    let t = text.trim().replace(/-/g, "+").replace(/_/g, "/");
    t += "=".repeat((4 - (t.length % 4)) % 4);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(t)) throw malformed("not valid base64");
    let binary;
    try { binary = atob(t); } catch (e) { throw malformed("not valid base64"); }
    if (btoa(binary) !== t) throw malformed("not canonical base64");  // a changed character always counts
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  }
  function b64url(bytes) {
    return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  async function sha256(bytes) { return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)); }

  // ---- RFC 9162 ----
  const leafHash = (leaf) => sha256(concat(new Uint8Array([0]), leaf));
  const nodeHash = (l, r) => sha256(concat(new Uint8Array([1]), l, r));
  const lsb = (n) => (n & 1n) === 1n;

  async function verifyInclusion(index, size, leaf, proof, root) {
    if (index < 0n || index >= size) return false;
    let fn = index, sn = size - 1n, r = leaf;
    for (const p of proof) {
      if (sn === 0n) return false;
      if (lsb(fn) || fn === sn) {
        r = await nodeHash(p, r);
        if (!lsb(fn)) { while (!lsb(fn) && fn !== 0n) { fn >>= 1n; sn >>= 1n; } }
      } else {
        r = await nodeHash(r, p);
      }
      fn >>= 1n; sn >>= 1n;
    }
    return sn === 0n && equal(r, root);
  }

  async function verifyConsistency(first, second, firstRoot, secondRoot, proof) {
    if (first === second) return proof.length === 0 && equal(firstRoot, secondRoot);
    if (first === 0n) return proof.length === 0 && equal(firstRoot, await sha256(new Uint8Array())) && second > 0n;
    if (!(first > 0n && first < second) || proof.length === 0) return false;
    const path = proof.slice();
    if ((first & (first - 1n)) === 0n) path.unshift(firstRoot);
    let fn = first - 1n, sn = second - 1n;
    while (lsb(fn)) { fn >>= 1n; sn >>= 1n; }
    let fr = path[0], sr = path[0];
    for (const c of path.slice(1)) {
      if (sn === 0n) return false;
      if (lsb(fn) || fn === sn) {
        fr = await nodeHash(c, fr);
        sr = await nodeHash(c, sr);
        if (!lsb(fn)) { while (!lsb(fn) && fn !== 0n) { fn >>= 1n; sn >>= 1n; } }
      } else {
        sr = await nodeHash(sr, c);
      }
      fn >>= 1n; sn >>= 1n;
    }
    return equal(fr, firstRoot) && equal(sr, secondRoot) && sn === 0n;
  }

  // ---- keys (JWKS) ----
  function parseTime(text) {
    if (text === null || text === undefined) return null;
    if (typeof text !== "string" || !text.includes("T")) throw malformed("expected an RFC 3339 time");
    const value = Date.parse(text);
    if (Number.isNaN(value)) throw malformed("expected an RFC 3339 time");
    return value;
  }
  function formatTime(ms) { return ms === null ? "no time" : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z"); }

  async function importKeys(jwks) {
    const keys = new Map();
    for (const jwk of (jwks && jwks.keys) || []) {
      if (!jwk || jwk.kty !== "OKP" || jwk.crv !== "Ed25519") continue;
      const raw = b64decode(jwk.x);
      if (raw.length !== 32) throw malformed("a published key is not 32 bytes");
      const x = b64url(raw);
      const kid = b64url(await sha256(utf8.encode('{"crv":"Ed25519","kty":"OKP","x":"' + x + '"}')));
      if (jwk.kid !== undefined && jwk.kid !== null && jwk.kid !== kid) throw malformed("a key's kid is not its thumbprint");
      const cryptoKey = await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", x: x }, { name: "Ed25519" }, false, ["verify"]);
      keys.set(kid, {
        kid: kid, raw: raw, purpose: String(jwk.purpose || TOMBSTONE), noteName: jwk.note_name || null,
        compromisedAt: parseTime(jwk.compromised_at), cryptoKey: cryptoKey,
      });
    }
    return keys;
  }
  const verifySig = (key, sig, data) => crypto.subtle.verify({ name: "Ed25519" }, key.cryptoKey, sig, data);

  // ---- checkpoints (C2SP signed notes) ----
  function parseCheckpoint(text, what) {
    try {
      return parseCheckpointStrict(text);
    } catch (e) {
      if (e instanceof Fail) throw malformed(what + ": " + e.detail.detail);
      throw e;
    }
  }
  function parseCheckpointStrict(text) {
    if (typeof text !== "string" || utf8.encode(text).length > 16384) throw malformed("a checkpoint is a signed note of a few lines");
    text = text.replace(/\r\n/g, "\n");
    const cut = text.indexOf("\n\n");
    if (cut < 0) throw malformed("the checkpoint has no signature block");
    const body = text.slice(0, cut) + "\n";
    const lines = body.split("\n").slice(0, -1);
    if (lines.length < 3) throw malformed("a checkpoint body has an origin, a tree size and a root hash");
    if (!/^(0|[1-9][0-9]{0,18})$/.test(lines[1])) throw malformed("the checkpoint's tree size is not a decimal number");
    const root = b64decode(lines[2]);
    if (root.length !== 32) throw malformed("the checkpoint's root hash is not 32 bytes");
    let time = null;
    for (const line of lines.slice(3)) if (line.startsWith("time ")) time = parseTime(line.slice(5));
    const signatures = [];
    for (const line of text.slice(cut + 2).split("\n")) {
      if (!line) continue;
      if (!line.startsWith("\u2014 ") || (line.match(/ /g) || []).length !== 2) throw malformed("a signature line reads '— name base64'");
      const [name, blob] = line.slice(2).split(" ");
      const raw = b64decode(blob);
      if (raw.length < 5) throw malformed("a checkpoint signature is too short");
      signatures.push({ name: name, hash: raw.slice(0, 4), sig: raw.slice(4) });
    }
    if (!signatures.length) throw malformed("the checkpoint carries no signature");
    return { origin: lines[0], size: BigInt(lines[1]), root: root, time: time, body: utf8.encode(body), signatures: signatures };
  }
  async function verifyCheckpoint(cp, keys) {
    const known = [...keys.values()].filter((k) => k.purpose === CHECKPOINT && k.noteName);
    for (const s of cp.signatures) {
      for (const key of known) {
        const hash = (await sha256(concat(key.noteName, "\n", new Uint8Array([1]), key.raw))).slice(0, 4);
        if (key.noteName === s.name && equal(hash, s.hash)) {
          if (!(await verifySig(key, s.sig, cp.body))) throw new Fail("checkpoint_signature_mismatch");
          if (key.compromisedAt !== null && (cp.time === null || key.compromisedAt <= cp.time)) {
            throw new Fail("checkpoint_key_compromised", { compromised_at: formatTime(key.compromisedAt), checkpoint_time: formatTime(cp.time) });
          }
          return key;
        }
      }
    }
    throw new Fail("checkpoint_unknown_key");
  }

  // ---- receipts ----
  function nonNegativeInt(value, name) {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw malformed("`" + name + "` must be a non-negative integer");
    return BigInt(value);
  }
  function hashes(value, name) {
    if (!Array.isArray(value) || value.length > MAX_PROOF_HASHES) throw malformed("`" + name + "` must be a list of base64 hashes");
    const out = value.map(b64decode);
    if (out.some((h) => h.length !== 32)) throw malformed("every hash in `" + name + "` must be 32 bytes");
    return out;
  }
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  function fields(value, allowed, what) {
    const unknown = Object.keys(value).filter((k) => !allowed.includes(k));
    if (unknown.length) throw malformed(what + " has a field it should not have");
  }
  function parseReceipt(doc) {
    if (!isObject(doc)) throw malformed("a receipt is a JSON object");
    if ("payloadType" in doc && !("envelope" in doc)) doc = { envelope: doc };
    fields(doc, ["format", "tombstone_id", "envelope", "inclusion", "checkpoint", "salts"], "the receipt");
    if ("format" in doc && doc.format !== RECEIPT_FORMAT) throw malformed("its `format` is not " + RECEIPT_FORMAT);
    const envelope = doc.envelope;
    if (!isObject(envelope)) throw malformed("it has no `envelope`");
    fields(envelope, ["payloadType", "payload", "signatures"], "the envelope");
    const sigs = envelope.signatures;
    if (!Array.isArray(sigs) || sigs.length !== 1 || !isObject(sigs[0])) throw malformed("the envelope must carry exactly one signature");
    fields(sigs[0], ["keyid", "sig"], "the signature");
    if (typeof sigs[0].keyid !== "string" || typeof envelope.payloadType !== "string") throw malformed("`payloadType` and `keyid` must be strings");
    const payload = b64decode(envelope.payload), signature = b64decode(sigs[0].sig);
    let inclusion = doc.inclusion;
    if (inclusion !== undefined && inclusion !== null && !isObject(inclusion)) throw malformed("`inclusion` must be an object");
    inclusion = inclusion || {};
    fields(inclusion, ["leaf_index", "tree_size", "hashes"], "the inclusion proof");
    if (doc.checkpoint !== undefined && doc.checkpoint !== null && typeof doc.checkpoint !== "string") throw malformed("`checkpoint` must be text");
    if (doc.tombstone_id !== undefined && doc.tombstone_id !== null && typeof doc.tombstone_id !== "string") throw malformed("`tombstone_id` must be a string");
    return {
      tombstoneId: doc.tombstone_id ?? null, payloadType: envelope.payloadType, payload: payload, keyid: sigs[0].keyid, signature: signature,
      leafIndex: "leaf_index" in inclusion ? nonNegativeInt(inclusion.leaf_index, "leaf_index") : null,
      treeSize: "tree_size" in inclusion ? nonNegativeInt(inclusion.tree_size, "tree_size") : null,
      proof: hashes("hashes" in inclusion ? inclusion.hashes : [], "hashes"), checkpoint: doc.checkpoint ?? null,
    };
  }
  // A bundle (what a subject's mail attaches): {"format": BUNDLE_FORMAT, "request", "receipts": [...]}; mails
  // sent before the format was named carry it without `format`. As tombstones/receipt.py: bundle_items.
  const isBundle = (doc) => isObject(doc) && ("receipts" in doc || doc.format === BUNDLE_FORMAT || "export" in doc);
  function bundleItems(doc) {
    if ("export" in doc && !("receipts" in doc)) throw malformed("it is a copy of your data (the export an access request sends), not a receipt: there is nothing to verify in it");
    fields(doc, ["format", "request", "receipts", "salts_destroyed_at"], "the bundle");
    if ("format" in doc && doc.format !== BUNDLE_FORMAT) throw malformed("its `format` is not " + BUNDLE_FORMAT);
    if (!Array.isArray(doc.receipts)) throw malformed("the bundle's `receipts` must be a list");
    if (!doc.receipts.length) throw malformed("the bundle holds no receipts");
    if (doc.receipts.length > MAX_BUNDLE_RECEIPTS) throw malformed("the bundle holds more receipts than a request can have");
    const request = doc.request;
    if (request !== undefined && request !== null && !Number.isInteger(request) && typeof request !== "string") throw malformed("the bundle's `request` must be a request number");
    return doc.receipts;
  }
  async function verifyDocument(doc, keys, latest) {
    if (!isBundle(doc)) return verify(doc, keys, latest);
    const items = bundleItems(doc);
    let cp = null;
    for (let i = 0; i < items.length; i++) {
      try {
        cp = await verify(items[i], keys, latest);  // the first failure is the verdict
      } catch (e) {
        if (e instanceof Fail && items.length > 1) e.prefix = "Receipt " + (i + 1) + " of " + items.length + ": ";
        throw e;
      }
    }
    return cp;
  }
  function pae(type, payload) {
    const typeBytes = utf8.encode(type);
    return concat("DSSEv1 " + typeBytes.length + " ", typeBytes, " " + payload.length + " ", payload);
  }

  async function verify(doc, keys, latest) {
    const r = parseReceipt(doc);
    const key = keys.get(r.keyid);
    if (!key || key.purpose !== TOMBSTONE) throw new Fail("unknown_key", { kid: r.keyid.slice(0, 64) });
    const signed = pae(r.payloadType, r.payload);
    if (!(await verifySig(key, r.signature, signed))) {
      if (r.checkpoint && r.leafIndex !== null && !(await proofHolds(r, signed))) {
        throw new Fail("field_changed", { detail: "the statement matches neither its signature nor the entry in the log" });
      }
      throw new Fail("signature_mismatch");
    }
    let statement = null;
    try { statement = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(r.payload)); } catch (e) { statement = null; }
    if (!isObject(statement)) throw malformed("the signed payload is not a tombstone statement");
    if (r.tombstoneId !== null && r.tombstoneId !== statement.tombstone_id) {
      throw new Fail("field_changed", { detail: "the receipt's tombstone id is not the one in the signed statement" });
    }
    if (!r.checkpoint) throw new Fail("not_in_log", { detail: "the receipt carries no checkpoint" });
    const cp = parseCheckpoint(r.checkpoint, "the checkpoint");
    await verifyCheckpoint(cp, keys);
    if (cp.origin !== statement.log_origin) throw new Fail("wrong_log", { origin: cp.origin.slice(0, 200) });
    if (r.leafIndex === null || r.treeSize === null) throw new Fail("not_in_log", { detail: "the receipt carries no inclusion proof" });
    if (r.leafIndex >= cp.size) throw new Fail("not_in_log", { detail: "its position is beyond the end of the checkpoint's tree" });
    if (r.treeSize !== cp.size || !(await verifyInclusion(r.leafIndex, cp.size, await leafHash(signed), r.proof, cp.root))) {
      throw new Fail("proof_mismatch");
    }
    if (key.compromisedAt !== null && (cp.time === null || key.compromisedAt <= cp.time)) {
      throw new Fail("key_compromised", { compromised_at: formatTime(key.compromisedAt), checkpoint_time: formatTime(cp.time) });
    }
    await consistent(cp, latest, keys, "the log's latest checkpoint");
    return cp;
  }
  async function proofHolds(r, signed) {
    let cp;
    try { cp = parseCheckpointStrict(r.checkpoint); } catch (e) { return false; }
    return r.treeSize === cp.size && verifyInclusion(r.leafIndex, cp.size, await leafHash(signed), r.proof, cp.root);
  }
  async function consistent(cp, otherNote, keys, what) {
    const other = parseCheckpoint(otherNote, "the other checkpoint");
    await verifyCheckpoint(other, keys);
    if (other.origin !== cp.origin) throw new Fail("wrong_log", { origin: other.origin.slice(0, 200) });
    const [small, large] = other.size <= cp.size ? [other, cp] : [cp, other];
    let proof = [];
    if (small.size > 0n && small.size < large.size) {
      const response = await fetch("/api/v1/log/consistency?first=" + small.size + "&second=" + large.size,
        { credentials: "omit", headers: { Accept: "application/json" } });
      const data = await response.json().catch(() => null);
      if (response.ok) proof = hashes(data.hashes, "consistency proof");
      // the log says it never reached that size: no proof exists, the check below fails as it should
      else if (!(data && data.code === "tree_size_out_of_range")) throw new Error("the log did not answer");
    }
    if (!(await verifyConsistency(small.size, large.size, small.root, large.root, proof))) {
      throw new Fail("checkpoint_inconsistent", { detail: "with " + what + "; sizes " + small.size + " and " + large.size });
    }
  }
  async function getJSON(url) {
    const response = await fetch(url, { credentials: "omit", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(url + " answered " + response.status);
    return response.json();
  }

  // ---- the page ----
  function message(code, detail) {
    return (reasons[code] || code).replace(/\{(\w+)\}/g, (_, name) => (detail && detail[name] !== undefined ? String(detail[name]) : ""));
  }
  function show(code, text, agrees, neutral) {
    box.hidden = false;
    box.dataset.code = code;
    box.dataset.agrees = agrees ? "yes" : "no";
    box.className = "verdict " + (neutral ? "neutral" : agrees && code === "genuine" ? "good" : "bad");
    $("browser-message").textContent = text;
  }
  async function run() {
    if (!window.crypto || !crypto.subtle) {
      show("unsupported", "Your browser cannot check signatures here (no WebCrypto). Use the offline verifier.", false, true);
      return;
    }
    if (bundle === null) {
      show("malformed", "Your browser has nothing to check either: the text is not a receipt.", serverCode === "malformed");
      return;
    }
    let code = "genuine", detail = {}, cp = null, latest = null, prefix = "";
    try {
      const [jwks, head] = await Promise.all([getJSON("/.well-known/tombstone-keys.json"), getJSON("/api/v1/log/checkpoint")]);
      const keys = await importKeys(jwks);
      latest = head && head.note;
      cp = await verifyDocument(bundle, keys, latest);
      const remembered = localStorage.getItem("tombstones.checkpoint." + cp.origin);
      if (remembered) await consistent(parseCheckpoint(latest, "the latest checkpoint"), remembered, keys, "the checkpoint your browser saw on an earlier visit");
    } catch (e) {
      if (e instanceof Fail) { code = e.code; detail = e.detail; prefix = e.prefix || ""; }
      else if (e && e.name === "NotSupportedError") {
        show("unsupported", "Your browser cannot check Ed25519 signatures. Rely on the server's check, or use the offline verifier.", false, true);
        return;
      } else {
        show("error", "Your browser could not finish its own check (the log did not answer). Try again in a minute.", false, true);
        return;
      }
    }
    if (code === "genuine" && cp && latest) localStorage.setItem("tombstones.checkpoint." + cp.origin, latest);
    const agrees = code === serverCode;
    show(code, "Checked in your browser against the published keys: " + prefix + message(code, detail) + " " +
      (agrees ? "This agrees with our server." : "This does not agree with our server's answer: do not rely on this tombstone."), agrees);
  }
  run();
})();
