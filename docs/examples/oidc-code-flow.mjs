// The authorization-code flow with PKCE, as a product's server runs it, with openid-client.
// Headless: it signs the user in through the API (a browser would show the sign-in page).
// Env: GATEHOUSE_URL, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, EMAIL, PASSWORD. Prints the tokens as JSON.
import * as client from "openid-client";

const env = process.env, base = new URL(env.GATEHOUSE_URL ?? "http://localhost:8080");
const http = base.protocol === "http:" ? { execute: [client.allowInsecureRequests] } : {}; // plain-HTTP dev server
const config = await client.discovery(base, env.CLIENT_ID, env.CLIENT_SECRET, undefined, http);

const verifier = client.randomPKCECodeVerifier(), state = client.randomState();
const authorizeUrl = client.buildAuthorizationUrl(config, {
  redirect_uri: env.REDIRECT_URI, scope: "openid profile email", state,
  code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256",
});

// The browser's part: a session cookie, then the authorization request, answered with a redirect.
const signIn = await fetch(new URL("/api/auth/sign-in/email", base), {
  method: "POST", headers: { "content-type": "application/json" },
  body: JSON.stringify({ email: env.EMAIL, password: env.PASSWORD }),
});
if (!signIn.ok) throw new Error(`sign-in: ${signIn.status} ${await signIn.text()}`);
const cookie = signIn.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
const answer = await fetch(authorizeUrl, { headers: { cookie }, redirect: "manual" });
const callback = new URL(answer.headers.get("location")); // REDIRECT_URI?code=…&state=…&iss=…

// The product's part: exchange the code (PKCE verifier, state, iss and ID token checked).
const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
console.log(JSON.stringify({ access_token: tokens.access_token, id_token_claims: tokens.claims() }, null, 2));
