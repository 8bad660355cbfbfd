// Check a `connect` request's `device` proof with the real OpenClaw Gateway's own code (tests/test_device.py).
//
// Usage: node verify_device.mjs <openclaw dist folder>   (stdin: one JSON object, stdout: one JSON object)
//
// stdin:  a JSON array of cases, each {"connectParams": {...}, "nonce": "<the challenge nonce>",
//          "seedB64url": "<the 32-byte seed, optional>"}
// stdout: a JSON array of results, one a case: {"derivedId", "idMatches", "nonceMatches", "signedAtIsNumber",
//          "payloadVersion", "normalizedPublicKey", "v3Payload", "gatewaySignature"}
//
// It runs the checks of the Gateway's `verifyGatewayConnectDeviceProof` (message-handler-*.mjs, "connect-device-
// proof.ts") in the same order with the same dist functions, except the clock-skew check (a fixed test vector is
// older than two minutes): the id must be `deriveDeviceIdFromPublicKey(publicKey)`, the nonce the challenge's,
// `resolveDeviceSignaturePayloadVersion` (which rebuilds the v3 string from the connect params itself) must
// answer "v3", and the public key must normalise. With a seed it also signs the dist's own v3 string with the
// dist's `signDevicePayload`, so the test can compare the bytes of both signatures (Ed25519 is deterministic).
//
// The dist's file names carry a build hash and its exports are minified to one-letter aliases, so the functions
// are found by name: the file (among a few name prefixes) that defines `function NAME(` and the alias its
// `export { NAME as x }` gives it.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dist = process.argv[2];
const files = readdirSync(dist).filter((name) => name.endsWith(".mjs"));

async function findExport(prefixes, name) {
  for (const file of files.filter((f) => prefixes.some((p) => f.startsWith(p)))) {
    const text = readFileSync(path.join(dist, file), "utf8");
    if (!text.includes(`function ${name}(`)) continue;
    const exportLine = text.match(/export\s*\{([^}]*)\}/g)?.at(-1) ?? "";
    const alias = exportLine.match(new RegExp(`\\b${name}\\s+as\\s+([A-Za-z_$][\\w$]*)`));
    const mod = await import(pathToFileURL(path.join(dist, file)).href);
    const fn = alias ? mod[alias[1]] : mod[name];
    if (typeof fn === "function") return fn;
  }
  throw new Error(`${name} not found in ${dist} (prefixes ${prefixes.join(", ")})`);
}

const deriveDeviceIdFromPublicKey = await findExport(["device-identity-"], "deriveDeviceIdFromPublicKey");
const normalizeDevicePublicKeyBase64Url = await findExport(["device-identity-"], "normalizeDevicePublicKeyBase64Url");
const signDevicePayload = await findExport(["device-identity-"], "signDevicePayload");
const buildDeviceAuthPayloadV3 = await findExport(["device-auth-"], "buildDeviceAuthPayloadV3");
const ed25519PrivateKeyPemFromRaw = await findExport(["ed25519-signature-"], "ed25519PrivateKeyPemFromRaw");
const resolveDeviceSignaturePayloadVersion = await findExport(
  ["node-connect-reconcile-"],
  "resolveDeviceSignaturePayloadVersion",
);

function check(input) {
  const params = input.connectParams;
  const device = params.device;
  // As message-handler-*.mjs does before the proof: role defaults to "operator", scopes to [].
  const role = params.role ?? "operator";
  const scopes = Array.isArray(params.scopes) ? params.scopes : [];
  const providedNonce = typeof device.nonce === "string" ? device.nonce.trim() : "";
  const derivedId = deriveDeviceIdFromPublicKey(device.publicKey);
  const signatureToken = params.auth?.token ?? params.auth?.deviceToken ?? params.auth?.bootstrapToken ?? null;
  const v3Payload = buildDeviceAuthPayloadV3({
    deviceId: device.id,
    clientId: params.client.id,
    clientMode: params.client.mode,
    role,
    scopes,
    signedAtMs: device.signedAt,
    token: signatureToken,
    nonce: providedNonce,
    platform: params.client.platform,
    deviceFamily: params.client.deviceFamily,
  });
  const out = {
    derivedId,
    idMatches: Boolean(derivedId) && derivedId === device.id,
    nonceMatches: providedNonce !== "" && providedNonce === input.nonce,
    signedAtIsNumber: typeof device.signedAt === "number",
    payloadVersion: resolveDeviceSignaturePayloadVersion({
      device,
      connectParams: params,
      role,
      scopes,
      signedAtMs: device.signedAt,
      nonce: providedNonce,
    }),
    normalizedPublicKey: normalizeDevicePublicKeyBase64Url(device.publicKey),
    v3Payload,
    gatewaySignature: null,
  };
  if (input.seedB64url) {
    const pem = ed25519PrivateKeyPemFromRaw(Buffer.from(input.seedB64url, "base64url"));
    out.gatewaySignature = signDevicePayload(pem, v3Payload);
  }
  return out;
}

const cases = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(cases.map(check)));
