// End-to-end test of Gatehouse's /api/auth surface with the real better-auth browser client
// (createAuthClient + organizationClient): sign-up, organizations, sign-in options, error codes,
// account deletion and social sign-in. The mailed links are in mailed-links.test.mjs, the second
// factor in two-factor.test.mjs, the simulated browser in browser.mjs. Run by
// e2e/auth_client_test.go against an in-process server, or by hand against any running Gatehouse:
//
//   GATEHOUSE_BASE_URL=http://localhost:8080 node --test --test-reporter=spec e2e/js/

import assert from "node:assert/strict";
import { test } from "node:test";

import { assertDate, base, Browser, emailOf, fails, ok, password, run, scenario, sessionCookie } from "./browser.mjs";

test("Ada and Grace: sign-up, organization, invitation, roles, sign-out", async (t) => {
  const step = scenario(t);
  const ada = new Browser("Ada");
  const grace = new Browser("Grace");
  const adaEmail = emailOf("ada");
  const graceEmail = emailOf("grace");
  const slug = `engines-${run}`;
  let adaUser, graceUser, org, invitation, graceMember;

  await step("Ada signs up", async () => {
    const data = ok(ada, await ada.client.signUp.email({ name: "Ada Lovelace", email: adaEmail, password }), "signUp.email");
    adaUser = data.user;
    assert.equal(adaUser.email, adaEmail);
    assert.equal(adaUser.name, "Ada Lovelace");
    assert.equal(adaUser.emailVerified, false);
    assert.equal(adaUser.image, null);
    assertDate(adaUser.createdAt, "user.createdAt");
    assert.ok(adaUser.id, "user.id");
    assert.ok(ada.cookies.has(sessionCookie), `signUp set no ${sessionCookie} cookie; Set-Cookie: ${ada.setCookies}`);
  });

  await step("the session cookie is HttpOnly, SameSite=Lax, Path=/", async () => {
    const { attrs } = ada.cookies.get(sessionCookie);
    assert.equal(attrs.httponly, true, "HttpOnly");
    assert.equal(String(attrs.samesite).toLowerCase(), "lax", "SameSite");
    assert.equal(attrs.path, "/", "Path");
    assert.equal(attrs["max-age"], "604800", "Max-Age (rememberMe defaults to true)");
  });

  let signInToken;
  await step("Ada signs in", async () => {
    const before = ada.cookies.get(sessionCookie).value;
    const data = ok(ada, await ada.client.signIn.email({ email: adaEmail, password }), "signIn.email");
    assert.equal(data.user.id, adaUser.id);
    assert.equal(data.redirect, false);
    assert.equal(data.url, null);
    assert.equal(typeof data.token, "string");
    signInToken = data.token;
    const value = ada.cookies.get(sessionCookie)?.value;
    assert.notEqual(value, before, "sign-in sets a new session cookie");
    // better-auth's signed-cookie format: encodeURIComponent(token + "." + base64(HMAC-SHA256)).
    const m = /^([A-Za-z0-9]{32})\.([A-Za-z0-9+/]{43}=)$/.exec(decodeURIComponent(value));
    assert.ok(m, `session cookie value ${value} is not token.signature`);
    assert.equal(m[1], data.token, "the cookie carries the sign-in token");
  });

  await step("getSession returns Ada's user and session", async () => {
    const data = ok(ada, await ada.client.getSession(), "getSession");
    assert.ok(data, `getSession returned null\n${ada.recent()}`);
    assert.equal(data.user.id, adaUser.id);
    assert.equal(data.user.email, adaEmail);
    assert.equal(data.session.userId, adaUser.id);
    assert.equal(data.session.token, signInToken, "session.token is the sign-in token");
    assertDate(data.session.expiresAt, "session.expiresAt");
    assert.ok(data.session.expiresAt.getTime() > Date.now(), "session.expiresAt is in the future");
    assert.equal(data.session.activeOrganizationId ?? null, null);
    assert.match(ada.lastHeaders.get("cache-control") ?? "", /no-store/, "get-session Cache-Control");
  });

  await step("Ada creates an organization", async () => {
    org = ok(ada, await ada.client.organization.create({ name: "Analytical Engines", slug }), "organization.create");
    assert.ok(org.id, "organization id");
    assert.equal(org.name, "Analytical Engines");
    assert.equal(org.slug, slug);
    assertDate(org.createdAt, "organization.createdAt");
    assert.equal(org.members?.length, 1, `members of the new organization: ${JSON.stringify(org.members)}`);
    assert.equal(org.members[0].userId, adaUser.id);
    assert.equal(org.members[0].role, "owner");
    assert.equal(org.members[0].organizationId, org.id);
  });

  await step("Ada sets it active", async () => {
    const data = ok(ada, await ada.client.organization.setActive({ organizationId: org.id }), "organization.setActive");
    assert.equal(data?.id, org.id);
    const session = ok(ada, await ada.client.getSession(), "getSession");
    assert.equal(session.session.activeOrganizationId, org.id, "session.activeOrganizationId");
  });

  await step("Ada invites Grace as developer", async () => {
    invitation = ok(
      ada,
      await ada.client.organization.inviteMember({ email: graceEmail, role: "developer" }),
      "organization.inviteMember",
    );
    assert.ok(invitation.id, "invitation id");
    assert.equal(invitation.organizationId, org.id, "invitation.organizationId (the active organization)");
    assert.equal(invitation.email, graceEmail);
    assert.equal(invitation.role, "developer");
    assert.equal(invitation.status, "pending");
    assert.equal(invitation.inviterId, adaUser.id);
    assertDate(invitation.expiresAt, "invitation.expiresAt");
    assert.ok(invitation.expiresAt.getTime() > Date.now(), "invitation.expiresAt is in the future");
  });

  await step("Grace signs up", async () => {
    const data = ok(grace, await grace.client.signUp.email({ name: "Grace Hopper", email: graceEmail, password }), "signUp.email");
    graceUser = data.user;
    assert.equal(graceUser.email, graceEmail);
    assert.ok(grace.cookies.has(sessionCookie), `signUp set no ${sessionCookie} cookie for Grace`);
  });

  await step("Grace accepts the invitation", async () => {
    const data = ok(
      grace,
      await grace.client.organization.acceptInvitation({ invitationId: invitation.id }),
      "organization.acceptInvitation",
    );
    assert.equal(data.invitation.id, invitation.id);
    assert.equal(data.invitation.status, "accepted");
    assert.equal(data.member.userId, graceUser.id);
    assert.equal(data.member.organizationId, org.id);
    assert.equal(data.member.role, "developer");
    graceMember = data.member;
    const session = ok(grace, await grace.client.getSession(), "getSession");
    assert.equal(session.session.activeOrganizationId, org.id, "the accepted organization becomes Grace's active one");
  });

  await step("Ada lists two members", async () => {
    const data = ok(ada, await ada.client.organization.listMembers({ query: { organizationId: org.id } }), "organization.listMembers");
    assert.equal(data.total, 2, "total");
    assert.equal(data.members.length, 2, "members.length");
    const byUser = Object.fromEntries(data.members.map((m) => [m.userId, m]));
    assert.equal(byUser[adaUser.id]?.role, "owner", "Ada's role");
    assert.equal(byUser[graceUser.id]?.role, "developer", "Grace's role");
    assert.equal(byUser[graceUser.id].id, graceMember.id, "Grace's member id");
    assert.equal(byUser[graceUser.id].user?.email, graceEmail, "member.user.email");
    assert.equal(byUser[graceUser.id].user?.name, "Grace Hopper", "member.user.name");
  });

  await step("listMembers defaults to the active organization", async () => {
    const data = ok(ada, await ada.client.organization.listMembers(), "organization.listMembers without organizationId");
    assert.equal(data.total, 2, "total");
  });

  await step("Ada makes Grace a viewer", async () => {
    const data = ok(
      ada,
      await ada.client.organization.updateMemberRole({ memberId: graceMember.id, role: "viewer" }),
      "organization.updateMemberRole",
    );
    assert.equal(data.id, graceMember.id);
    assert.equal(data.userId, graceUser.id);
    assert.equal(data.role, "viewer");
  });

  await step("getFullOrganization shows Grace as viewer", async () => {
    const full = ok(ada, await ada.client.organization.getFullOrganization(), "organization.getFullOrganization");
    assert.ok(full, `getFullOrganization returned null\n${ada.recent()}`);
    assert.equal(full.id, org.id);
    assert.equal(full.slug, slug);
    assert.equal(full.members.length, 2, "members.length");
    const g = full.members.find((m) => m.userId === graceUser.id);
    assert.equal(g?.role, "viewer", `Grace in ${JSON.stringify(full.members)}`);
    assert.equal(g.user?.email, graceEmail);
    assert.ok(Array.isArray(full.invitations), "invitations is an array");
    const byId = ok(
      ada,
      await ada.client.organization.getFullOrganization({ query: { organizationId: org.id } }),
      "organization.getFullOrganization by id",
    );
    assert.equal(byId?.id, org.id);
  });

  await step("hasPermission: a viewer can read projects but not create them", async () => {
    const read = ok(
      grace,
      await grace.client.organization.hasPermission({ permissions: { project: ["read"] }, organizationId: org.id }),
      "hasPermission project:read",
    );
    assert.deepEqual(read, { error: null, success: true }, "project:read");
    const create = ok(
      grace,
      await grace.client.organization.hasPermission({ permissions: { project: ["create"] }, organizationId: org.id }),
      "hasPermission project:create",
    );
    assert.deepEqual(create, { error: null, success: false }, "project:create");
  });

  let staleCookie;
  await step("Ada signs out", async () => {
    staleCookie = ada.cookies.get(sessionCookie);
    const data = ok(ada, await ada.client.signOut(), "signOut");
    assert.equal(data.success, true);
    assert.ok(!ada.cookies.has(sessionCookie), `sign-out did not expire the cookie; Set-Cookie: ${ada.setCookies.at(-1)}`);
    const session = ok(ada, await ada.client.getSession(), "getSession after sign-out");
    assert.equal(session, null);
  });

  await step("the signed-out session is revoked on the server", async () => {
    // A copy of the cookie kept elsewhere (another device, a stolen copy) is dead too.
    const stale = new Browser("Ada (stale cookie)");
    stale.cookies.set(sessionCookie, staleCookie);
    const session = ok(stale, await stale.client.getSession(), "getSession with the signed-out cookie");
    assert.equal(session, null);
  });
});

test("sign-in options: rememberMe, callbackURL, clearing the active organization", async (t) => {
  const step = scenario(t);
  const emmy = new Browser("Emmy");
  const email = emailOf("emmy");

  await step("sign up", async () => {
    ok(emmy, await emmy.client.signUp.email({ name: "Emmy Noether", email, password }), "signUp.email");
  });

  await step("rememberMe: false sets a browser-session cookie", async () => {
    const b = new Browser("Emmy, shared computer");
    ok(b, await b.client.signIn.email({ email, password, rememberMe: false }), "signIn.email rememberMe false");
    const c = b.cookies.get(sessionCookie);
    assert.ok(c, `no ${sessionCookie} cookie; Set-Cookie: ${b.setCookies}`);
    assert.equal(c.attrs["max-age"], undefined, `Max-Age on a rememberMe:false cookie: ${b.setCookies.at(-1)}`);
    assert.equal(c.attrs.expires, undefined, `Expires on a rememberMe:false cookie: ${b.setCookies.at(-1)}`);
    const session = ok(b, await b.client.getSession(), "getSession");
    assert.equal(session?.user.email, email);
  });

  await step("callbackURL comes back as a redirect", async () => {
    const b = new Browser("Emmy, from a deep link");
    const data = ok(b, await b.client.signIn.email({ email, password, callbackURL: "/dashboard" }), "signIn.email with callbackURL");
    assert.equal(data.redirect, true);
    assert.equal(data.url, "/dashboard");
  });

  await step("an off-site callbackURL is refused", async () => {
    const b = new Browser("Emmy, phished");
    const res = await b.client.signIn.email({ email, password, callbackURL: "https://evil.example/steal" });
    assert.equal(res.data, null, `signIn.email with an off-site callbackURL succeeded\n${b.recent()}`);
    assert.equal(res.error?.status, 403, `error.status\n${b.recent()}`);
    assert.ok(!b.cookies.has(sessionCookie), "a refused sign-in sets no session cookie");
  });

  await step("setActive(null) clears the active organization", async () => {
    const org = ok(emmy, await emmy.client.organization.create({ name: "Rings", slug: `rings-${run}` }), "organization.create");
    let session = ok(emmy, await emmy.client.getSession(), "getSession");
    assert.equal(session.session.activeOrganizationId, org.id, "a new organization becomes active");
    const list = ok(emmy, await emmy.client.organization.list(), "organization.list");
    assert.deepEqual(list.map((o) => o.id), [org.id], "organization.list");
    const cleared = ok(emmy, await emmy.client.organization.setActive({ organizationId: null }), "organization.setActive null");
    assert.equal(cleared, null);
    session = ok(emmy, await emmy.client.getSession(), "getSession");
    assert.equal(session.session.activeOrganizationId, null, "activeOrganizationId after clearing");
    const full = ok(emmy, await emmy.client.organization.getFullOrganization(), "getFullOrganization without an active one");
    assert.equal(full, null);
  });
});

test("errors carry better-auth codes", async (t) => {
  const step = scenario(t);
  const charles = new Browser("Charles");
  const email = emailOf("charles");

  await step("sign up", async () => {
    ok(charles, await charles.client.signUp.email({ name: "Charles Babbage", email, password }), "signUp.email");
  });

  await step("a wrong password is 401 INVALID_EMAIL_OR_PASSWORD", async () => {
    const b = new Browser("Charles, second browser");
    const res = await b.client.signIn.email({ email, password: "not-the-password" });
    fails(b, res, "signIn.email with a wrong password", 401, "INVALID_EMAIL_OR_PASSWORD");
    assert.ok(!b.cookies.has(sessionCookie), "a failed sign-in sets no session cookie");
  });

  await step("an unknown email is the same 401", async () => {
    const b = new Browser("Nobody");
    const res = await b.client.signIn.email({ email: emailOf("nobody"), password });
    fails(b, res, "signIn.email with an unknown email", 401, "INVALID_EMAIL_OR_PASSWORD");
  });

  await step("a duplicate sign-up is 422 USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", async () => {
    const b = new Browser("Charles, third browser");
    const res = await b.client.signUp.email({ name: "Charles Again", email, password });
    fails(b, res, "signUp.email with a taken email", 422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL");
  });

  await step("a short password is 400 VALIDATION_ERROR", async () => {
    const b = new Browser("Dora");
    const res = await b.client.signUp.email({ name: "Dora", email: emailOf("dora"), password: "short" });
    fails(b, res, "signUp.email with a 5-character password", 400, "VALIDATION_ERROR");
  });

  await step("a cookie-carrying write from another origin is 403 INVALID_ORIGIN", async () => {
    const evil = charles.withOrigin("Charles (cross-site)", "https://evil.example");
    const res = await evil.client.organization.create({ name: "Evil", slug: `evil-${run}` });
    fails(evil, res, "organization.create from https://evil.example", 403, "INVALID_ORIGIN");
  });

  await step("a cookie-carrying write without Origin is 403 MISSING_OR_NULL_ORIGIN", async () => {
    const bare = charles.withOrigin("Charles (no Origin)", null);
    const res = await bare.client.organization.create({ name: "Bare", slug: `bare-${run}` });
    fails(bare, res, "organization.create without Origin", 403, "MISSING_OR_NULL_ORIGIN");
  });

  await step("without a session, organization routes are 401", async () => {
    const anon = new Browser("Anonymous");
    const res = await anon.client.organization.listMembers();
    assert.equal(res.data, null);
    assert.equal(res.error?.status, 401, `listMembers without a session\n${anon.recent()}`);
  });
});

test("deleteUser: the password, the only owner's organizations, then the account goes", async (t) => {
  const step = scenario(t);
  const eve = new Browser("Eve");
  const email = emailOf("eve");
  let orgId;

  await step("sign up and create an organization", async () => {
    ok(eve, await eve.client.signUp.email({ name: "Eve", email, password }), "signUp.email");
    orgId = ok(eve, await eve.client.organization.create({ name: "Eve's shop", slug: `eve-${run}` }), "organization.create").id;
  });

  await step("a wrong password is 400 INVALID_PASSWORD", async () => {
    fails(eve, await eve.client.deleteUser({ password: "not-the-password" }), "deleteUser with a wrong password", 400, "INVALID_PASSWORD");
  });

  await step("the only owner is 409 until the organization is archived", async () => {
    const res = await eve.client.deleteUser({ password });
    fails(eve, res, "deleteUser as the only owner", 409, "YOU_CANNOT_DELETE_YOUR_ACCOUNT_AS_THE_ONLY_OWNER");
    assert.match(res.error.message, /Eve's shop/, `the message names the organization\n${eve.recent()}`);
    const archived = await eve.fetch(`${base}/api/v1/organizations/${orgId}`, { method: "DELETE" });
    assert.equal(archived.status, 200, `archive the organization\n${eve.recent()}`);
  });

  await step("then the account goes and the session with it", async () => {
    const data = ok(eve, await eve.client.deleteUser({ password }), "deleteUser");
    assert.deepEqual(data, { success: true, message: "User deleted" });
    assert.ok(!eve.cookies.has(sessionCookie), `the session cookie is expired\n${eve.recent()}`);
    assert.equal(ok(eve, await eve.client.getSession(), "getSession"), null);
    const again = new Browser("Eve, again");
    fails(again, await again.client.signIn.email({ email, password }), "signIn.email after deletion", 401, "INVALID_EMAIL_OR_PASSWORD");
  });
});

test("social sign-in with GitHub (a local fake), then listAccounts", async (t) => {
  const providers = await (await fetch(`${base}/api/auth/providers`)).json();
  if (!providers.providers.some((p) => p.id === "github")) {
    t.skip("GitHub sign-in is not configured on this server");
    return;
  }
  const step = scenario(t);
  const b = new Browser("Dorothy");
  let providerURL;

  await step("signIn.social answers the provider's authorization URL", async () => {
    const data = ok(b, await b.client.signIn.social({ provider: "github", callbackURL: "/dashboard" }), "signIn.social");
    assert.equal(data.redirect, true);
    providerURL = new URL(data.url);
    assert.equal(providerURL.searchParams.get("code_challenge_method"), "S256");
    assert.equal(providerURL.searchParams.get("redirect_uri"), `${base}/api/auth/callback/github`);
    assert.ok(b.cookies.has("gatehouse.social_flow"), `no flow cookie; Set-Cookie: ${b.setCookies}`);
  });

  await step("the provider sends the browser back, signed in", async () => {
    const atProvider = await fetch(providerURL, { redirect: "manual" });
    assert.equal(atProvider.status, 302, "the fake's authorize redirect");
    const back = await b.fetch(atProvider.headers.get("location"), { redirect: "manual" });
    assert.equal(back.status, 302, `callback\n${b.recent()}`);
    assert.equal(back.headers.get("location"), "/dashboard");
    assert.ok(!b.cookies.has("gatehouse.social_flow"), "the flow cookie outlived the callback");
    const session = ok(b, await b.client.getSession(), "getSession");
    assert.equal(session?.user.email, "dorothy@example.com");
    assert.equal(session?.user.emailVerified, true);
  });

  await step("listAccounts names the GitHub account", async () => {
    const accounts = ok(b, await b.client.listAccounts(), "listAccounts");
    assert.equal(accounts.length, 1, JSON.stringify(accounts));
    assert.equal(accounts[0].providerId, "github");
    assert.equal(accounts[0].accountId, "5151");
    assert.deepEqual(accounts[0].scopes, ["read:user", "user:email"]);
    assertDate(accounts[0].createdAt, "account.createdAt");
  });
});
