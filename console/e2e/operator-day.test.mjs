// The operator's day (issue 26), walked through the console alone at 1280 and 390 px, with
// axe-core on every view and failure on any console error. Each step is a function of the
// walk's state; later steps are appended to `steps` (the order is the day's order).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Page, launch, fixtures, widths } from './harness.mjs';

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
];

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
