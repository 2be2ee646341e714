// What the e2e/js/*.test.mjs files share: the server under test, the names of its cookies, and
// a simulated browser around the real better-auth client with the assertions made on it.
//
// Node's fetch keeps no cookies, so each simulated browser gets its own cookie jar and sends
// Origin on unsafe requests, as a browser does for a same-origin fetch.

import assert from "node:assert/strict";

import { createAuthClient } from "better-auth/client";
import { organizationClient } from "better-auth/client/plugins";

export const base = (process.env.GATEHOUSE_BASE_URL || "").replace(/\/+$/, "");
if (!base) {
  throw new Error("GATEHOUSE_BASE_URL is not set (for example http://127.0.0.1:8080)");
}
const baseOrigin = new URL(base).origin;

// The cookies' names: prefix "gatehouse", and under https the __Host- variant
// (identity.SessionCookieName; the second step's cookie follows the session cookie).
const hostPrefix = baseOrigin.startsWith("https:") ? "__Host-" : "";
export const sessionCookie = `${hostPrefix}gatehouse.session_token`;
export const twoFactorCookie = `${hostPrefix}gatehouse.two_factor`;

// Unique per run, so the files can also run against a long-lived server.
export const run = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
export const emailOf = (name) => `${name}+${run}@example.com`;
export const password = "correct-horse-battery";

/** Parses one Set-Cookie header into {name, value, attrs} (attrs keys lower-cased). */
function parseSetCookie(header) {
  const [pair, ...rest] = header.split(";");
  const eq = pair.indexOf("=");
  const attrs = {};
  for (const part of rest) {
    const i = part.indexOf("=");
    const key = (i < 0 ? part : part.slice(0, i)).trim().toLowerCase();
    attrs[key] = i < 0 ? true : part.slice(i + 1).trim();
  }
  return { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim(), attrs };
}

function expired(attrs) {
  if (attrs["max-age"] !== undefined && attrs["max-age"] !== true) {
    return Number(attrs["max-age"]) <= 0;
  }
  if (typeof attrs.expires === "string") {
    const t = Date.parse(attrs.expires);
    return !Number.isNaN(t) && t <= Date.now();
  }
  return false;
}

function truncate(s, n = 600) {
  return s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s;
}

/**
 * A simulated browser: a cookie jar, an Origin header on unsafe requests, a better-auth client
 * whose requests go through both, and a transcript for failure messages.
 *
 * Options: server (default base); origin (default the server's; null sends none); plugins, a
 * function of the browser that returns the client's plugins (default organizationClient).
 */
export class Browser {
  constructor(name, { origin, server = base, plugins = () => [organizationClient()] } = {}) {
    this.name = name;
    this.server = server;
    this.serverOrigin = new URL(server).origin;
    this.origin = origin === undefined ? this.serverOrigin : origin;
    this.plugins = plugins;
    /** @type {Map<string, {value: string, attrs: object}>} */
    this.cookies = new Map();
    /** Every Set-Cookie header received, raw, newest last. */
    this.setCookies = [];
    /** What a plugin's redirect callback recorded (twoFactorClient's onTwoFactorRedirect). */
    this.redirects = [];
    this.transcript = [];
    this.client = createAuthClient({
      baseURL: server,
      plugins: plugins(this),
      fetchOptions: { customFetchImpl: (input, init) => this.fetch(input, init) },
    });
  }

  /** A second tab of this browser (same jar) that sends a different Origin. */
  withOrigin(name, origin) {
    const other = new Browser(name, { origin, server: this.server, plugins: this.plugins });
    other.cookies = this.cookies;
    return other;
  }

  async fetch(input, init = {}) {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init.method || (input instanceof Request ? input.method : "GET")).toUpperCase();
    const headers = new Headers(init.headers);
    if (url.origin === this.serverOrigin && this.cookies.size > 0) {
      headers.set("cookie", [...this.cookies].map(([k, c]) => `${k}=${c.value}`).join("; "));
    }
    if (this.origin && !["GET", "HEAD"].includes(method)) {
      headers.set("origin", this.origin);
    }
    const res = await fetch(input, { ...init, method, headers });
    for (const raw of res.headers.getSetCookie()) {
      this.setCookies.push(raw);
      const c = parseSetCookie(raw);
      if (expired(c.attrs)) this.cookies.delete(c.name);
      else this.cookies.set(c.name, { value: c.value, attrs: c.attrs });
    }
    this.lastHeaders = res.headers;
    const body = await res.clone().text();
    this.transcript.push(
      `${method} ${url.pathname}${url.search}` +
        (typeof init.body === "string" ? ` ${truncate(init.body, 300)}` : "") +
        `\n    -> ${res.status} ${truncate(body)}`,
    );
    return res;
  }

  /** The last few exchanges, for assertion messages. */
  recent(n = 3) {
    return `${this.name}'s last requests:\n  ${this.transcript.slice(-n).join("\n  ")}`;
  }
}

/** Asserts a client result succeeded and returns its data. */
export function ok(browser, result, what) {
  assert.ok(result && typeof result === "object", `${what}: no result`);
  assert.equal(
    result.error,
    null,
    `${what} failed: ${JSON.stringify(result.error)}\n${browser.recent()}`,
  );
  return result.data;
}

/** Asserts a client result failed with status and better-auth error code. */
export function fails(browser, result, what, status, code) {
  const ctx = `${what}\n${browser.recent()}`;
  assert.equal(result.data, null, `${what} should fail, got data ${JSON.stringify(result.data)}\n${browser.recent()}`);
  assert.ok(result.error, `${what}: no error\n${browser.recent()}`);
  assert.equal(result.error.status, status, `${what}: error.status\n${ctx}`);
  assert.equal(result.error.code, code, `${what}: error.code\n${ctx}`);
  assert.equal(typeof result.error.message, "string", `${what}: error.message\n${ctx}`);
}

/**
 * Asserts an ISO-8601 timestamp from the wire. The client's JSON parser revives exactly the
 * ISO-8601 strings into Dates, so anything else stays a string and fails here.
 */
export function assertDate(value, what) {
  assert.ok(value instanceof Date && !Number.isNaN(value.getTime()), `${what}: want an ISO-8601 timestamp, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * Runs the steps of one scenario as subtests, in order. After a failed step the rest are
 * skipped, so the report names the first failure instead of a cascade.
 */
export function scenario(t) {
  let failed = null;
  return (name, fn) =>
    t.test(name, { skip: failed ? `skipped: "${failed}" failed` : false }, async () => {
      try {
        await fn();
      } catch (err) {
        failed = name;
        throw err;
      }
    });
}
