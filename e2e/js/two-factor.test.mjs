// End-to-end test of Gatehouse's TOTP second factor with the real better-auth browser client and
// its twoFactorClient plugin. Codes are computed here from the otpauth URI's secret with the npm
// library otpauth, not with Gatehouse code. Run by e2e/auth_client_test.go with the other
// e2e/js/*.test.mjs, or by hand:
//
//   GATEHOUSE_BASE_URL=http://localhost:8080 node --test --test-reporter=spec e2e/js/

import assert from "node:assert/strict";
import { test } from "node:test";

import { twoFactorClient } from "better-auth/client/plugins";
import * as OTPAuth from "otpauth";

import { Browser, fails, ok, password, run, sessionCookie, twoFactorCookie } from "./browser.mjs";

/** A browser whose client has twoFactorClient, its redirect callback recorded in redirects. */
function twoFactorBrowser(name) {
  return new Browser(name, { plugins: (b) => [twoFactorClient({ onTwoFactorRedirect: (ctx) => b.redirects.push(ctx) })] });
}

/** Signs in with the password and asserts that the second factor is due. */
async function signInPending(b, email) {
  const before = b.redirects.length;
  const data = ok(b, await b.client.signIn.email({ email, password }), "signIn.email");
  assert.equal(data.twoFactorRedirect, true, `twoFactorRedirect\n${b.recent()}`);
  assert.deepEqual(data.twoFactorMethods, ["totp"]);
  assert.equal(b.redirects.length, before + 1, "twoFactorClient's onTwoFactorRedirect was not called");
  assert.ok(!b.cookies.has(sessionCookie), `a session cookie before the second factor\n${b.recent()}`);
  assert.ok(b.cookies.has(twoFactorCookie), `no ${twoFactorCookie} cookie\n${b.recent()}`);
}

/**
 * Asserts that the browser now has a session of userId, whose user's twoFactorEnabled (the
 * field better-auth's twoFactor plugin adds to the user) is twoFactorEnabled.
 */
async function signedInAs(b, userId, twoFactorEnabled) {
  assert.ok(b.cookies.has(sessionCookie), `no session cookie\n${b.recent()}`);
  assert.ok(!b.cookies.has(twoFactorCookie), `the ${twoFactorCookie} cookie was not expired\n${b.recent()}`);
  const s = ok(b, await b.client.getSession(), "getSession");
  assert.equal(s?.user?.id, userId, `getSession\n${b.recent()}`);
  assert.equal(s?.user?.twoFactorEnabled, twoFactorEnabled, `getSession's user.twoFactorEnabled\n${b.recent()}`);
}

test("TOTP with backup codes through twoFactorClient", async (t) => {
  const ada = twoFactorBrowser("Ada");
  const email = `ada-2fa+${run}@example.com`;
  let userId, totp, backupCodes, enrolCode;

  await t.test("Ada signs up and enables TOTP", async () => {
    const signedUp = ok(ada, await ada.client.signUp.email({ name: "Ada", email, password }), "signUp.email").user;
    userId = signedUp.id;
    assert.equal(signedUp.twoFactorEnabled, false, `signUp.email's user.twoFactorEnabled\n${ada.recent()}`);
    fails(ada, await ada.client.twoFactor.enable({ password: "wrong-password" }), "enable with a wrong password", 400, "INVALID_PASSWORD");
    const data = ok(ada, await ada.client.twoFactor.enable({ password }), "twoFactor.enable");
    totp = OTPAuth.URI.parse(data.totpURI);
    assert.ok(totp instanceof OTPAuth.TOTP, `totpURI ${data.totpURI}`);
    assert.equal(totp.issuer, "Gatehouse");
    assert.equal(totp.label, email);
    assert.equal(totp.digits, 6);
    assert.equal(totp.period, 30);
    assert.equal(totp.algorithm, "SHA1");
    backupCodes = data.backupCodes;
    assert.equal(backupCodes.length, 10);
    assert.equal(new Set(backupCodes).size, 10);
    // Enabled, not yet on: better-auth sets twoFactorEnabled at the first code.
    await signedInAs(ada, userId, false);
  });

  await t.test("the first code turns it on; the same code again is refused", async () => {
    enrolCode = totp.generate();
    const on = ok(ada, await ada.client.twoFactor.verifyTotp({ code: enrolCode }), "verifyTotp");
    assert.equal(on.user.twoFactorEnabled, true, `verifyTotp's user.twoFactorEnabled\n${ada.recent()}`);
    await signedInAs(ada, userId, true);
    fails(ada, await ada.client.twoFactor.verifyTotp({ code: enrolCode }), "the replayed code", 401, "INVALID_CODE");
  });

  await t.test("sign-in answers twoFactorRedirect; a TOTP code completes it", async () => {
    ok(ada, await ada.client.signOut(), "signOut");
    await signInPending(ada, email);
    fails(ada, await ada.client.twoFactor.verifyTotp({ code: enrolCode }), "the enrolment's code, replayed", 401, "INVALID_CODE");
    // The code of the next 30-second step: the one accepted at enrolment used up this step.
    const code = totp.generate({ timestamp: Date.now() + 30_000 });
    const data = ok(ada, await ada.client.twoFactor.verifyTotp({ code }), "verifyTotp after sign-in");
    assert.equal(data.user.id, userId);
    assert.equal(data.user.twoFactorEnabled, true);
    assert.match(data.token, /^[A-Za-z0-9]{32}$/);
    await signedInAs(ada, userId, true);
  });

  await t.test("a backup code works once", async () => {
    ok(ada, await ada.client.signOut(), "signOut");
    await signInPending(ada, email);
    ok(ada, await ada.client.twoFactor.verifyBackupCode({ code: backupCodes[0] }), "verifyBackupCode");
    await signedInAs(ada, userId, true);

    ok(ada, await ada.client.signOut(), "signOut");
    await signInPending(ada, email);
    fails(ada, await ada.client.twoFactor.verifyBackupCode({ code: backupCodes[0] }), "the used backup code", 401, "INVALID_BACKUP_CODE");
    ok(ada, await ada.client.twoFactor.verifyBackupCode({ code: backupCodes[1] }), "another backup code");
    await signedInAs(ada, userId, true);
  });

  await t.test("disable turns it off", async () => {
    ok(ada, await ada.client.twoFactor.disable({ password }), "twoFactor.disable");
    ok(ada, await ada.client.signOut(), "signOut");
    const data = ok(ada, await ada.client.signIn.email({ email, password }), "signIn.email");
    assert.equal(data.user.id, userId);
    assert.equal(data.user.twoFactorEnabled, false, `signIn.email's user.twoFactorEnabled after disable\n${ada.recent()}`);
    assert.equal(data.twoFactorRedirect, undefined);
    await signedInAs(ada, userId, false);
  });
});
