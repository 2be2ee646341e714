// Usage analytics, billing, webhooks and the account view (issue 26), at 1280 and 390 px,
// with axe-core and no console error on every view: an owner's flow, then a viewer who sees
// the same pages without write controls. The steps live in steps-usage-billing-account.mjs.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Page, deniedReason, launch, fixtures, widths } from './harness.mjs';
import { environments, grantAndDelete, ingestUsage, plans, processor, revokeOtherSession, seeUsage, twoFactor, webhooks } from './steps-usage-billing-account.mjs';

const fx = fixtures();
const projectPath = (s) => `/console/orgs/${s.orgId}/projects/${s.projectId}`;

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

for (const width of widths) {
  test(`analytics, billing, webhooks and account at ${width} px`, async (t) => {
    const w = { page: await Page.open(browser, width), width, state: { orgId: fx.orgId, projectId: fx.projectId } };
    let failed = false;
    const step = (name, fn) =>
      t.test(name, { skip: failed && 'an earlier step failed' }, async () => {
        try {
          await fn();
        } catch (e) {
          failed = true;
          throw e;
        }
      });
    try {
      await step('sign in as the owner', async () => {
        await w.page.signIn(fx.owner.email, fx.owner.password, `${projectPath(w.state)}/usage`);
        await w.page.heading('Usage analytics');
      });
      await step('an API key for usage (service accounts are their own view)', async () => {
        const envs = await environments(w);
        const r = await w.page.api('POST', `/api/v1/projects/${fx.projectId}/service-accounts`, {
          name: `usage-${width}`,
          scopes: ['usage:write'],
          environmentId: envs[width === 390 ? 'staging' : 'development'],
        });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        w.state.apiKey = r.body.data.apiKey;
      });
      await step('ingest usage with the key', () => ingestUsage(w));
      await step('see it in the charts and the subject directory', () => seeUsage(w));
      await step('grant a feature; deletion explained', () => grantAndDelete(w));
      await step('create a plan, archive and restore it', () => plans(w));
      await step('connect and disconnect the payment processor', () => processor(w));
      await step('webhook endpoint', () => webhooks(w));
      await step('revoke another session from the account view', () => revokeOtherSession(w, fx.owner.email, fx.owner.password));
      await step('second factor: enrol, turn on, turn off', () => twoFactor(w, fx.owner.password));
    } finally {
      await w.page.close();
    }
  });

  test(`a viewer sees analytics, billing and webhooks without write controls at ${width} px`, async () => {
    const page = await Page.open(browser, width);
    const p = page.page;
    try {
      const path = projectPath({ orgId: fx.orgId, projectId: fx.projectId });
      await page.signIn(fx.viewer.email, fx.viewer.password, `${path}/usage`);
      await page.heading('Usage analytics');
      await page.check('usage analytics (viewer)');
      await page.visit(`${path}/billing`, 'Billing');
      for (const name of ['Create plan', 'Connect']) {
        await assertDenied(p, name);
      }
      await page.check('billing (viewer)');
      await page.visit(`${path}/webhooks`, 'Webhooks');
      await assertDenied(p, 'Add endpoint');
      await page.check('webhooks (viewer)');
      await page.visit(`${path}/usage/subjects/cust-${width}-a`, `Subject cust-${width}-a`);
      await assertDenied(p, 'Create grant');
      await assertDenied(p, 'Delete subject');
      await page.check('subject page (viewer)');
      await page.allowErrors(/status of 403/, async () => {
        const r = await page.api('POST', `/api/v1/projects/${fx.projectId}/billing/plans`, { key: `viewer-${width}`, name: 'V', amount: 1, currency: 'usd', interval: 'month' });
        assert.equal(r.status, 403);
        assert.equal(r.body.title, 'Permission denied');
      });
    } finally {
      await page.close();
    }
  });
}

/** assertDenied: every button with that name is shown disabled, with the reason. */
async function assertDenied(p, name) {
  const buttons = p.getByRole('button', { name, exact: true });
  await buttons.first().waitFor();
  for (const b of await buttons.all()) {
    assert.match(await deniedReason(b), /^Your role \(viewer\) lacks /);
    assert.equal(await b.getAttribute('aria-disabled'), 'true', `${name} is disabled for a viewer`);
  }
}
