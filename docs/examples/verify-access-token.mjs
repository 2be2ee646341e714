// Verifies a Gatehouse access token as a resource server does: its signature against the
// published JSON Web Keys, its issuer, audience, type and expiry, with jose.
// Env: GATEHOUSE_URL, CLIENT_ID (the audience), ACCESS_TOKEN. Prints the claims as JSON.
import { createRemoteJWKSet, jwtVerify } from "jose";

const base = process.env.GATEHOUSE_URL ?? "http://localhost:8080";
const jwks = createRemoteJWKSet(new URL("/.well-known/jwks.json", base)); // fetched once, cached
const { payload, protectedHeader } = await jwtVerify(process.env.ACCESS_TOKEN, jwks, {
  issuer: new URL(base).origin, audience: process.env.CLIENT_ID, typ: "at+jwt",
});
console.log(JSON.stringify({ alg: protectedHeader.alg, kid: protectedHeader.kid, ...payload }, null, 2));
