// Steps for usage analytics, billing, webhooks and the account view (issue 26), for
// usage-billing-account.test.mjs and the operator's day (operator-day.test.mjs) alike. Each is
// a function of w = {page, width, state}, state = {orgId, projectId, apiKey (for ingestUsage), ...};
// this module registers no test, so importing it runs nothing.
import assert from 'node:assert/strict';
import { URI } from 'otpauth';
import { base } from './harness.mjs';

const projectPath = (s) => `/console/orgs/${s.orgId}/projects/${s.projectId}`;

/** environments returns the project's environments by name (from the console's session). */
export async function environments(w) {
  const r = await w.page.api('GET', `/api/v1/projects/${w.state.projectId}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return Object.fromEntries(r.body.data.environments.map((e) => [e.name, e.id]));
}

/** chooseEnvironment picks an environment in the view's Environment select. */
async function chooseEnvironment(p, name) {
  await p.getByRole('combobox', { name: 'Environment' }).first().click();
  await p.getByRole('option', { name, exact: true }).click();
}

/**
 * ingestUsage sends usage events with the API key in state.apiKey (X-API-Key, as a product
 * service would, from the test, not the browser) into state.usageEnv; the subjects are
 * `cust-<width>-a` (2 events, quantity 2 + 3) and `cust-<width>-b` (1 event, quantity 1).
 */
export async function ingestUsage(w) {
  const envs = await environments(w);
  // Not production: access.test.mjs ingests into the seeded project's production at the same time.
  w.state.usageEnv ??= w.width === 390 ? 'staging' : 'development';
  const environmentId = envs[w.state.usageEnv];
  const events = [
    { subjectId: `cust-${w.width}-a`, quantity: 2 },
    { subjectId: `cust-${w.width}-a`, quantity: 3 },
    { subjectId: `cust-${w.width}-b`, quantity: 1 },
  ];
  for (const [i, e] of events.entries()) {
    const r = await fetch(`${base}/api/v1/projects/${w.state.projectId}/usage-events`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': w.state.apiKey },
      body: JSON.stringify({ eventId: `evt-${w.width}-${i}-${Date.now()}`, environmentId, meter: 'api_calls', ...e }),
    });
    assert.equal(r.status, 201, await r.text());
  }
}

/** seeUsage opens the analytics and finds the ingested events in the chart and the directory. */
export async function seeUsage(w) {
  const p = w.page.page;
  await w.page.visit(`${projectPath(w.state)}/usage`, 'Usage analytics');
  await chooseEnvironment(p, w.state.usageEnv);
  await p.getByTestId('chart-summary').first().filter({ hasText: '3 events, quantity 6 in the last 30 days; at most 2 active subjects a day.' }).waitFor();
  await p.getByTestId('figure-Active today').filter({ hasText: /^2$/ }).waitFor();
  await p.getByRole('cell', { name: 'api_calls' }).first().waitFor();
  // The directory: search, sort, then the subject's page.
  await p.getByLabel('Search subject ids').fill(`cust-${w.width}`);
  await p.getByTestId('subject-total').filter({ hasText: /^2 subjects$/ }).waitFor();
  await p.getByRole('combobox', { name: 'Sort' }).click();
  await p.getByRole('option', { name: 'Subject id, Z to A' }).click();
  const first = p.getByRole('table', { name: /Subjects/ }).getByRole('row').nth(1);
  await first.getByRole('link', { name: `cust-${w.width}-b` }).waitFor();
  await w.page.check('usage analytics');
  await p.getByRole('link', { name: `cust-${w.width}-a` }).click();
  await w.page.heading(`Subject cust-${w.width}-a`);
  await p.getByTestId('chart-summary').filter({ hasText: /^2 events, quantity 5 in the last 30 days\.$/ }).waitFor();
  await p.getByTestId('billing-status').filter({ hasText: 'none' }).waitFor();
  await w.page.check('subject page');
}

/** grantAndDelete grants a feature on the subject's page and shows deletion's refusal. */
export async function grantAndDelete(w) {
  const p = w.page.page;
  await p.getByLabel('Feature key').fill('beta-access');
  await p.getByRole('button', { name: 'Create grant' }).click();
  await p.getByRole('table', { name: 'Entitlements by source' }).getByRole('cell', { name: 'beta-access' }).waitFor();
  // A usage subject that is no identity: the API's 404 problem shows in the dialog.
  await w.page.allowErrors(/status of 404/, async () => {
    await p.getByRole('button', { name: 'Delete subject' }).click();
    const dialog = p.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Delete subject' }).click();
    await dialog.getByTestId('problem').filter({ hasText: 'HTTP 404' }).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
  });
  w.page.assertClean('subject grant and delete');
}

/** plans creates a plan (after the API refused a bad key beside the field), archives and restores it. */
export async function plans(w) {
  const p = w.page.page;
  await w.page.visit(`${projectPath(w.state)}/billing`, 'Billing');
  await w.page.check('billing');
  const key = `pro-${w.width}`;
  const form = p.getByRole('form', { name: 'Create a plan' });
  await form.getByLabel('Key', { exact: false }).first().fill('Not A Slug');
  await form.getByLabel('Plan name').fill(`Pro ${w.width}`);
  await form.getByLabel('Amount (minor units)').fill('4900');
  await form.getByLabel('Entitlements').fill('seats=10\nsso=true');
  await w.page.allowErrors(/status of 400/, async () => {
    await form.getByRole('button', { name: 'Create plan' }).click();
    await form.locator('input[aria-invalid="true"]').first().waitFor();
  });
  await form.getByLabel('Key', { exact: false }).first().fill(key);
  await form.getByRole('button', { name: 'Create plan' }).click();
  const row = p.getByRole('row').filter({ hasText: key });
  await row.getByRole('cell', { name: 'seats=10, sso=true' }).waitFor();
  await row.getByRole('button', { name: `Archive ${key}` }).click();
  await p.getByRole('dialog').getByRole('button', { name: 'Archive' }).click();
  await row.waitFor({ state: 'detached' });
  await p.getByText('Archived', { exact: true }).click();
  await p.getByRole('button', { name: `Restore ${key}` }).click();
  await p.getByRole('dialog').getByRole('button', { name: 'Restore' }).click();
  await p.getByText('Active', { exact: true }).click();
  await p.getByRole('row').filter({ hasText: key }).getByText('active', { exact: true }).waitFor();
  const list = await w.page.api('GET', `/api/v1/projects/${w.state.projectId}/billing/plans`);
  assert.ok(list.body.data.some((x) => x.key === key && x.archived === false && x.amount === 4900), 'the restored plan is active');
  await w.page.check('billing after restore');
}

/** webhooks adds an endpoint (secret shown once), sends a test, disables and enables it. */
export async function webhooks(w) {
  const p = w.page.page;
  await w.page.visit(`${projectPath(w.state)}/webhooks`, 'Webhooks');
  await w.page.check('webhooks');
  const url = `http://127.0.0.1:9/hook-${w.width}`;
  await p.getByRole('textbox', { name: /^URL/ }).fill(url);
  await p.getByRole('button', { name: 'Add endpoint' }).click();
  const secret = await p.getByTestId('secret-value').textContent();
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  await p.getByRole('link', { name: url }).click();
  await w.page.heading('Webhook endpoint');
  await p.getByRole('button', { name: 'Send test event' }).click();
  await p.getByRole('table', { name: /Delivery attempts/ }).getByRole('cell', { name: 'ping' }).first().waitFor({ timeout: 10_000 });
  await p.getByRole('button', { name: 'Disable' }).click();
  await p.getByRole('dialog').getByRole('button', { name: 'Disable' }).click();
  await p.getByText('disabled (manual)').waitFor();
  await p.getByRole('dialog').waitFor({ state: 'detached' });
  await p.getByRole('button', { name: 'Enable' }).click();
  await p.getByRole('dialog').getByRole('button', { name: 'Enable' }).click();
  await p.getByText('enabled', { exact: true }).waitFor();
  await w.page.check('webhook endpoint');
}

/**
 * revokeOtherSession signs the same user in from a second browser (its own user agent), and
 * revokes that session from the account view; the second browser is then signed out.
 */
export async function revokeOtherSession(w, email, password) {
  const p = w.page.page;
  const agent = `OtherBrowser/${w.width}`;
  const other = await p.context().browser().newContext({ baseURL: base, userAgent: agent });
  try {
    const r = await other.request.post('/api/auth/sign-in/email', { data: { email, password }, headers: { Origin: base } });
    assert.equal(r.status(), 200, await r.text());
    const before = await (await other.request.get('/api/auth/get-session')).json();
    assert.equal(before?.user?.email, email);
    await w.page.visit('/console/account', 'Your account');
    await w.page.check('account');
    const row = p.getByRole('row').filter({ hasText: agent });
    await row.getByRole('button', { name: /^Revoke session/ }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await row.waitFor({ state: 'detached' });
    const after = await (await other.request.get('/api/auth/get-session')).json();
    assert.equal(after, null, 'the revoked browser is signed out');
    await p.getByTestId('two-factor-state').filter({ hasText: 'off' }).waitFor();
    w.page.assertClean('account after revoking');
  } finally {
    await other.close();
  }
}


/**
 * processor connects an environment to Stripe (after the API refused a malformed key beside
 * its field), sees only the mode and last four characters, and disconnects it.
 */
export async function processor(w) {
  const p = w.page.page;
  const env = w.width === 390 ? 'staging' : 'development';
  await w.page.visit(`${projectPath(w.state)}/billing`, 'Billing');
  const card = p.getByRole('region', { name: `${env} processor connection` });
  const [key, hook] = [card.locator('input[type=password]').nth(0), card.locator('input[type=password]').nth(1)];
  await key.fill('not-a-stripe-key');
  await hook.fill('whsec_abcdefgh12345678');
  await w.page.allowErrors(/status of 400/, async () => {
    await card.getByRole('button', { name: 'Connect' }).click();
    await key.and(p.locator('[aria-invalid="true"]')).waitFor();
  });
  const secretKey = `sk_test_A1b2C3d4E5f6W${w.width}`;
  await key.fill(secretKey);
  await card.getByRole('button', { name: 'Connect' }).click();
  await card.getByTestId(`processor-${env}`).filter({ hasText: 'Connected (test)' }).waitFor();
  await card.getByText(`key ••••${secretKey.slice(-4)}`).waitFor();
  assert.equal(await key.inputValue(), '', 'the secret is not kept in the form');
  assert.ok(!(await p.content()).includes(secretKey), 'the secret key is nowhere on the page');
  await w.page.check('billing, processor connected');
  await card.getByRole('button', { name: 'Disconnect' }).click();
  await p.getByRole('dialog').getByRole('button', { name: 'Disconnect' }).click();
  await card.getByTestId(`processor-${env}`).filter({ hasText: 'Not connected' }).waitFor();
}

/**
 * twoFactor enrols the signed-in user's authenticator app from the account view (QR, URI and
 * ten backup codes shown), turns it on with a code computed from the URI, and turns it off.
 */
export async function twoFactor(w, password) {
  const p = w.page.page;
  await w.page.visit('/console/account', 'Your account');
  const sec = p.getByRole('region', { name: 'Second factor' });
  await sec.getByTestId('two-factor-state').filter({ hasText: /^off$/ }).waitFor();
  await sec.locator('input[type=password]').fill(password);
  await sec.getByRole('button', { name: 'Set up authenticator app' }).click();
  const uri = await sec.getByTestId('totp-uri').textContent();
  await sec.getByTestId('totp-qr').waitFor();
  const codes = (await sec.getByTestId('secret-value').textContent()).trim().split('\n');
  assert.equal(codes.length, 10, 'ten backup codes');
  await w.page.check('account, second factor enrolment');
  await sec.getByRole('textbox', { name: /^Code from the app/ }).fill(URI.parse(uri).generate());
  await sec.getByRole('button', { name: 'Turn on' }).click();
  await sec.getByTestId('two-factor-state').filter({ hasText: /^on$/ }).waitFor();
  await sec.locator('input[type=password]').fill(password);
  await sec.getByRole('button', { name: 'Turn off second factor' }).click();
  await sec.getByTestId('two-factor-state').filter({ hasText: /^off$/ }).waitFor();
  w.page.assertClean('account, second factor');
}
