// A relying party built on openid-client (a certified OpenID Connect client) that completes
// authorization code grants for oauth/signing_alg_node_test.go: the Go test signs a user in and
// drives the authorization endpoint, then hands this process the callback URL, and
// openid-client does the rest: discovery, the code exchange with client_secret_basic and PKCE,
// the iss, state and ID token claim checks, and (enableNonRepudiationChecks) the ID token's
// signature against the JWKS, with the algorithm the client registered or, when it registered
// none, one of discovery's id_token_signing_alg_values_supported.
//
// Protocol: one JSON request per line on stdin, one JSON answer per line on stdout.
//   request: {rp, issuer, clientId, clientSecret, alg, callback, verifier, state}
//            rp names a relying party: its Configuration (discovery and JWKS cache) is made at
//            its first request and reused by the next requests of the same rp.
//   answer:  {ok: true, alg, kid, sub, aud} or {ok: false, error, message, status}

import * as readline from "node:readline";
import * as client from "openid-client";

const configs = new Map();

async function configOf(req) {
  let config = configs.get(req.rp);
  if (!config) {
    const metadata = { client_secret: req.clientSecret };
    if (req.alg) {
      metadata.id_token_signed_response_alg = req.alg;
    }
    config = await client.discovery(new URL(req.issuer), req.clientId, metadata,
      client.ClientSecretBasic(req.clientSecret), { execute: [client.allowInsecureRequests] });
    client.enableNonRepudiationChecks(config);
    configs.set(req.rp, config);
  }
  return config;
}

function header(jwt) {
  return JSON.parse(Buffer.from(jwt.split(".")[0], "base64url").toString("utf8"));
}

async function handle(req) {
  try {
    const config = await configOf(req);
    const tokens = await client.authorizationCodeGrant(config, new URL(req.callback), {
      pkceCodeVerifier: req.verifier, expectedState: req.state, idTokenExpected: true,
    });
    const claims = tokens.claims();
    const h = header(tokens.id_token);
    return { ok: true, alg: h.alg, kid: h.kid, sub: claims.sub, aud: claims.aud };
  } catch (err) {
    const answer = { ok: false, error: err.error || err.code || err.name, message: String(err.message) };
    // A response openid-client refuses to read as an OAuth error (a status other than 400 or
    // 401) is the error's cause: its status and RFC 6749 error code are reported instead.
    if (err.cause instanceof Response) {
      answer.status = err.cause.status;
      try {
        answer.error = (await err.cause.json()).error || answer.error;
      } catch {}
    } else {
      for (let cause = err.cause; cause; cause = cause.cause) {
        answer.message += ": " + (cause.message ?? JSON.stringify(cause));
      }
    }
    return answer;
  }
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() === "") continue;
  const answer = await handle(JSON.parse(line));
  process.stdout.write(JSON.stringify(answer) + "\n");
}
