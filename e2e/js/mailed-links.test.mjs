// End-to-end test of the links Gatehouse mails, with the real better-auth browser client: email
// verification, password reset, a change of address, and a server that requires verified
// addresses. The Go harness (e2e/auth_client_test.go) delivers the app's mail to a real SMTP
// server and lists what arrived at GATEHOUSE_TEST_MAILBOX_URL?to=<address>; the links are read
// out of those messages. Without that harness the tests here are skipped.

import assert from "node:assert/strict";
import { test } from "node:test";

import { base, Browser, emailOf, fails, ok, password, scenario } from "./browser.mjs";

const mailbox = (process.env.GATEHOUSE_TEST_MAILBOX_URL || "").replace(/\/+$/, "");

/**
 * Waits for the n-th message to address and returns the link in it that starts with prefix
 * (after the server's base URL): of the default server, or of { server, box }.
 */
async function mailedLink(address, n, prefix, { server = base, box = mailbox } = {}) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const messages = await (await fetch(`${box}?to=${encodeURIComponent(address)}`)).json();
    if (messages.length >= n) {
      const links = messages[n - 1].text.match(/https?:\/\/\S+/g) || [];
      const link = links.find((l) => l.startsWith(server + prefix));
      assert.ok(link, `no ${prefix} link in: ${messages[n - 1].text}`);
      return link;
    }
    assert.ok(Date.now() < deadline, `${messages.length} messages to ${address} within 20s, want ${n}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("email verification and password reset through mailed links", { skip: mailbox ? false : "GATEHOUSE_TEST_MAILBOX_URL is not set" }, async (t) => {
  const step = scenario(t);
  const hedy = new Browser("Hedy");
  const email = emailOf("hedy");
  let resetToken;

  await step("sign up: a verification link is mailed", async () => {
    const data = ok(hedy, await hedy.client.signUp.email({ name: "Hedy Lamarr", email, password, callbackURL: "/welcome" }), "signUp.email");
    assert.equal(data.user.emailVerified, false);
  });

  await step("verifyEmail with the mailed token", async () => {
    const link = new URL(await mailedLink(email, 1, "/api/auth/verify-email?"));
    assert.equal(link.searchParams.get("callbackURL"), "/welcome");
    const data = ok(hedy, await hedy.client.verifyEmail({ query: { token: link.searchParams.get("token") } }), "verifyEmail");
    assert.deepEqual(data, { status: true, user: null });
    const session = ok(hedy, await hedy.client.getSession(), "getSession");
    assert.equal(session?.user.emailVerified, true, `the browser stays signed in, verified\n${hedy.recent()}`);
  });

  await step("sendVerificationEmail for a verified address is 400 EMAIL_ALREADY_VERIFIED", async () => {
    const res = await hedy.client.sendVerificationEmail({ email });
    fails(hedy, res, "sendVerificationEmail", 400, "EMAIL_ALREADY_VERIFIED");
  });

  await step("verifyEmail with a bad token is 401 INVALID_TOKEN", async () => {
    const b = new Browser("Nobody");
    fails(b, await b.client.verifyEmail({ query: { token: "x".repeat(43) } }), "verifyEmail with a bad token", 401, "INVALID_TOKEN");
  });

  await step("requestPasswordReset: the same answer with or without an account", async () => {
    const anon = new Browser("Hedy, another device");
    const want = { status: true, message: "If this email exists in our system, check your email for the reset link" };
    assert.deepEqual(ok(anon, await anon.client.requestPasswordReset({ email, redirectTo: `${base}/reset` }), "requestPasswordReset"), want);
    assert.deepEqual(ok(anon, await anon.client.requestPasswordReset({ email: emailOf("nobody"), redirectTo: `${base}/reset` }), "requestPasswordReset, no account"), want);
  });

  await step("the reset link forwards the token to redirectTo", async () => {
    const link = await mailedLink(email, 2, "/api/auth/reset-password/");
    const res = await fetch(link, { redirect: "manual" });
    assert.equal(res.status, 302);
    const to = new URL(res.headers.get("location"));
    assert.equal(`${to.origin}${to.pathname}`, `${base}/reset`);
    resetToken = to.searchParams.get("token");
    assert.equal(resetToken, link.split("/api/auth/reset-password/")[1].split("?")[0]);
  });

  await step("resetPassword: the new password works, the old one and the session do not", async () => {
    const anon = new Browser("Hedy, reset page");
    assert.deepEqual(ok(anon, await anon.client.resetPassword({ newPassword: "frequency-hopping-1942", token: resetToken }), "resetPassword"), { status: true });
    assert.equal(ok(hedy, await hedy.client.getSession(), "getSession after the reset"), null, "the old session ended");
    const sessions = await hedy.client.listSessions();
    assert.equal(sessions.error?.status, 401, `listSessions with the old session\n${hedy.recent()}`);
    const again = new Browser("Hedy, again");
    fails(again, await again.client.signIn.email({ email, password }), "signIn with the old password", 401, "INVALID_EMAIL_OR_PASSWORD");
    ok(again, await again.client.signIn.email({ email, password: "frequency-hopping-1942" }), "signIn with the new password");
    fails(again, await again.client.resetPassword({ newPassword: "another-password-1", token: resetToken }), "resetPassword twice", 400, "INVALID_TOKEN");
  });
});

test("changeEmail: the link goes to the new address, which then signs in", { skip: mailbox ? false : "GATEHOUSE_TEST_MAILBOX_URL is not set" }, async (t) => {
  const step = scenario(t);
  const kay = new Browser("Kay");
  const email = emailOf("kay");
  const newEmail = emailOf("kay.new");

  await step("sign up, then changeEmail answers { status: true }", async () => {
    ok(kay, await kay.client.signUp.email({ name: "Kay Antonelli", email, password }), "signUp.email");
    assert.deepEqual(ok(kay, await kay.client.changeEmail({ newEmail, callbackURL: "/settings" }), "changeEmail"), { status: true });
    fails(kay, await kay.client.changeEmail({ newEmail: email }), "changeEmail to the same address", 400, "EMAIL_IS_THE_SAME");
  });

  await step("the old address gets a notice; nothing changes before the link", async () => {
    const deadline = Date.now() + 20000;
    let notice;
    while (!notice) {
      const messages = await (await fetch(`${mailbox}?to=${encodeURIComponent(email)}`)).json();
      notice = messages.find((m) => m.subject.includes("about to change"));
      assert.ok(notice || Date.now() < deadline, `no notice to ${email}: ${JSON.stringify(messages.map((m) => m.subject))}`);
      if (!notice) await new Promise((r) => setTimeout(r, 50));
    }
    assert.match(notice.text, new RegExp(`to ${newEmail.replace(/[.+]/g, "\\$&")}`));
    const session = ok(kay, await kay.client.getSession(), "getSession");
    assert.equal(session?.user.email, email);
  });

  await step("the link moves the account; the session stays", async () => {
    const link = await mailedLink(newEmail, 1, "/api/auth/verify-email?");
    const res = await fetch(link, { redirect: "manual" });
    assert.equal(res.status, 302, `the link: ${res.status} ${await res.text()}`);
    assert.equal(res.headers.get("location"), "/settings");
    const session = ok(kay, await kay.client.getSession(), "getSession after the link");
    assert.equal(session?.user.email, newEmail);
    assert.equal(session?.user.emailVerified, true);
  });

  await step("the new address signs in, the old one does not", async () => {
    const again = new Browser("Kay, another device");
    const data = ok(again, await again.client.signIn.email({ email: newEmail, password }), "signIn with the new address");
    assert.equal(data.user.email, newEmail);
    fails(again, await again.client.signIn.email({ email, password }), "signIn with the old address", 401, "INVALID_EMAIL_OR_PASSWORD");
  });
});

// ---------------------------------------------------------------------------------------------
// A server that requires verified addresses (GATEHOUSE_REQUIRE_EMAIL_VERIFICATION=true).

const strictBase = (process.env.GATEHOUSE_STRICT_BASE_URL || "").replace(/\/+$/, "");
const strictMailbox = (process.env.GATEHOUSE_STRICT_MAILBOX_URL || "").replace(/\/+$/, "");

test("verification required: sign-up, the mailed link, then sign-in", { skip: strictBase && strictMailbox ? false : "GATEHOUSE_STRICT_BASE_URL is not set" }, async (t) => {
  const step = scenario(t);
  const strict = { server: strictBase, box: strictMailbox };
  const lin = new Browser("Lin", { server: strictBase });
  const email = emailOf("lin");

  await step("signUp.email starts no session", async () => {
    const data = ok(lin, await lin.client.signUp.email({ name: "Lin", email, password, callbackURL: "/welcome" }), "signUp.email");
    assert.equal(data.token, null);
    assert.equal(data.user.emailVerified, false);
    assert.equal(ok(lin, await lin.client.getSession(), "getSession"), null);
  });

  await step("the same address again gets the same kind of answer", async () => {
    const eve = new Browser("Eve", { server: strictBase });
    const data = ok(eve, await eve.client.signUp.email({ name: "Eve", email, password: "another-password-1" }), "signUp.email, taken");
    assert.equal(data.token, null);
    assert.equal(data.user.email, email);
    assert.equal(data.user.emailVerified, false);
  });

  await step("signIn.email before verifying is 403 EMAIL_NOT_VERIFIED", async () => {
    fails(lin, await lin.client.signIn.email({ email, password }), "signIn.email unverified", 403, "EMAIL_NOT_VERIFIED");
  });

  await step("the mailed link verifies and goes to the callbackURL", async () => {
    const link = await mailedLink(email, 1, "/api/auth/verify-email?", strict);
    const res = await fetch(link, { redirect: "manual" });
    assert.equal(res.status, 302, `the link: ${res.status} ${await res.text()}`);
    assert.equal(res.headers.get("location"), "/welcome");
  });

  await step("then signIn.email works, verified", async () => {
    const data = ok(lin, await lin.client.signIn.email({ email, password }), "signIn.email");
    assert.equal(data.user.emailVerified, true);
    const session = ok(lin, await lin.client.getSession(), "getSession");
    assert.equal(session?.user.email, email);
  });
});
