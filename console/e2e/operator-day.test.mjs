// The operator's day (issue 26), walked through the console alone at 1280 and 390 px, with
// axe-core on every view and failure on any console error. Each step is a function of the
// walk's state; later steps are appended to `steps` (the order is the day's order).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Page, launch, fixtures, widths } from './harness.mjs';
import { accessSteps } from './access-steps.mjs';
import { ingestUsage, seeUsage } from './steps-usage-billing-account.mjs';

const fx = fixtures();
let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** The steps of the day: [name, async (w) => {...}], w = {page, width, state}. */
export const steps = [
  [
    'sign in',
    async (w) => {
      const me = fx.operators[w.width];
      await w.page.signIn(me.email, me.password);
      await w.page.heading('Organizations');
      await w.page.check('organizations (first visit)');
    },
  ],
  [
    'create an organization',
    async (w) => {
      const p = w.page.page;
      w.state.orgName = `Walk Co ${w.width}`;
      await p.getByLabel('Name', { exact: false }).first().fill(w.state.orgName);
      await p.getByRole('button', { name: 'Create organization' }).click();
      await p.waitForURL(/\/console\/orgs\/org_[^/]+\/projects/);
      w.state.orgId = p.url().match(/orgs\/(org_[^/]+)/)[1];
      await w.page.shell();
      w.page.assertClean('after creating an organization');
    },
  ],
  [
    'create a project',
    async (w) => {
      const p = w.page.page;
      await w.page.heading('Projects');
      await w.page.check('projects (empty)');
      await p.getByLabel('Project name').fill('Storefront');
      await p.getByRole('button', { name: 'Create project' }).click();
      await p.waitForURL(/\/projects\/prj_[^/]+\/overview$/);
      w.state.projectId = p.url().match(/projects\/(prj_[^/]+)/)[1];
      await w.page.heading('Storefront');
      await p.getByRole('table', { name: 'Environments' }).getByText('production').waitFor();
      await w.page.check('project overview');
    },
  ],
  [
    'put a secret and reveal it',
    async (w) => {
      const p = w.page.page;
      await w.page.nav('Configuration');
      await w.page.heading('Configuration');
      await w.page.check('configuration (empty)');
      await p.getByRole('button', { name: 'Add entry' }).click();
      const dialog = p.getByRole('dialog', { name: 'Add an entry' });
      await dialog.getByLabel('Key').fill('STRIPE_SECRET_KEY');
      await dialog.getByLabel('Value', { exact: true }).fill('sk_test_walk_' + w.width);
      await dialog.getByLabel(/^Secret/).check();
      await w.page.check('add entry dialog');
      await dialog.getByRole('button', { name: 'Add entry' }).click();
      await dialog.waitFor({ state: 'hidden' });
      const table = p.getByRole('table', { name: 'Configuration entries' });
      await table.getByText('STRIPE_SECRET_KEY').waitFor();
      assert.equal(await table.getByText('sk_test_walk_' + w.width).count(), 0, 'the secret is masked in the table');
      await w.page.check('configuration (masked)');
      await p.getByRole('button', { name: 'Reveal STRIPE_SECRET_KEY' }).click();
      await p.getByTestId('value-STRIPE_SECRET_KEY').getByText(`"sk_test_walk_${w.width}"`).waitFor();
      await w.page.check('configuration (revealed)');
    },
  ],
  [
    'see the reveal in the audit log',
    async (w) => {
      const p = w.page.page;
      await w.page.nav('Project audit log');
      await w.page.heading('Project audit log');
      await p.getByLabel('Action').fill('config.reveal');
      await p.getByRole('button', { name: 'Filter' }).click();
      const rows = p.getByRole('table', { name: 'Audit log entries' }).getByRole('row');
      await rows.filter({ hasText: 'config.reveal' }).first().waitFor();
      assert.equal(await rows.filter({ hasText: 'config.reveal' }).count(), 1, 'one reveal audited');
      await w.page.check('audit log (reveal)');
      // The revealed value is gone after leaving the page.
      await w.page.nav('Configuration');
      await p.getByRole('table', { name: 'Configuration entries' }).getByText('STRIPE_SECRET_KEY').waitFor();
      assert.equal(await p.getByText('sk_test_walk_' + w.width).count(), 0, 'hidden again after leaving the page');
      await p.getByRole('button', { name: 'Reveal STRIPE_SECRET_KEY' }).waitFor();
    },
  ],
];

// The rest of the day, in the order: a service account and its key; usage events sent
// with the key from the test and seen in the charts; a role, a binding and the playground; an
// OIDC client; the key revoked, after which the next request with it is 401. accessSteps' own
// one-event ingest is left out: the charts expect exactly the events ingestUsage sends.
{
  const byName = Object.fromEntries(accessSteps().map((s) => [s[0], s]));
  steps.push(
    byName['create a service account and copy its key'],
    [
      'send usage events with the key and see them in the charts',
      async (w) => {
        w.state.usageEnv = 'production'; // the key is pinned to production
        await ingestUsage(w);
        await seeUsage(w);
      },
    ],
    byName['create a role and a binding, get allow and deny in the playground'],
    byName['register an OIDC client and see its secret once'],
    byName['revoke the key in the console: the next request with it is 401'],
  );
  for (const s of steps) assert.ok(s, 'a step of the day is missing from accessSteps()');
}

for (const width of widths) {
  test(`operator's day at ${width} px`, async (t) => {
    const w = { page: await Page.open(browser, width), width, state: {} };
    let failed = false;
    try {
      for (const [name, step] of steps) {
        await t.test(name, { skip: failed && 'an earlier step failed' }, async () => {
          try {
            await step(w);
          } catch (e) {
            failed = true;
            throw e;
          }
        });
      }
    } finally {
      await w.page.close();
    }
  });
}

test('fixtures', () => {
  for (const width of widths) assert.ok(fx.operators?.[width]?.email, `the Go test passes the operator for ${width} px`);
});
