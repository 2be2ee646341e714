// Service accounts, access control and OIDC clients (issue 26) at 1280 and 390 px on the seeded
// "Viewer Co" / "Storefront" project: the owner's flows (accessSteps), then the viewer's pages
// (viewerSteps). Each view is checked with axe-core and fails on any console error.
import { test, after, before } from 'node:test';
import { Page, launch, fixtures, widths } from './harness.mjs';
import { accessSteps, viewerSteps } from './access-steps.mjs';

const fx = fixtures();
let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

async function walk(t, w, steps) {
  let failed = false;
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
}

for (const width of widths) {
  test(`owner: service accounts, access control, OIDC clients at ${width} px`, async (t) => {
    const w = { page: await Page.open(browser, width), width, state: { orgId: fx.orgId, projectId: fx.projectId } };
    try {
      await w.page.signIn(fx.owner.email, fx.owner.password);
      await walk(t, w, accessSteps());
    } finally {
      await w.page.close();
    }
  });
  test(`viewer: the same pages without write controls at ${width} px`, async (t) => {
    const w = { page: await Page.open(browser, width), width, state: { orgId: fx.orgId, projectId: fx.projectId } };
    try {
      await w.page.signIn(fx.viewer.email, fx.viewer.password);
      await walk(t, w, viewerSteps());
    } finally {
      await w.page.close();
    }
  });
}
