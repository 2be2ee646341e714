// A viewer (fixture "Viewer Co") sees the organization's pages without write controls, and a
// write sent from the console's own session is refused with 403, at 1280 and 390 px.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Page, deniedReason, launch, fixtures, widths } from './harness.mjs';

const fx = fixtures();
let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** noWriteControls asserts that no button offering a write is enabled on the page. */
async function noWriteControls(page, where) {
  const p = page.page;
  const writes = /^(Create|Add|Save|Invite|Archive|Restore|Remove|Delete|Change|Edit|Reveal|Cancel invitation)\b/;
  for (const b of await p.getByRole('button').all()) {
    const name = (await b.getAttribute('aria-label')) ?? (await b.innerText());
    if (!writes.test(name.trim())) continue;
    const disabled = (await b.getAttribute('aria-disabled')) === 'true' || (await b.isDisabled());
    assert.ok(disabled, `${where}: the write control "${name.trim()}" is enabled for a viewer at ${page.width} px`);
  }
}

for (const width of widths) {
  test(`viewer at ${width} px`, async () => {
    const page = await Page.open(browser, width);
    const p = page.page;
    try {
      await page.signIn(fx.viewer.email, fx.viewer.password);
      await page.heading('Projects'); // home opens the viewer's only organization
      await p.getByRole('table', { name: 'Projects' }).getByText('Storefront', { exact: true }).waitFor();
      assert.equal(await p.getByRole('button', { name: 'Create project' }).count(), 0, 'no create form');
      await noWriteControls(page, 'projects');
      // A disabled control says why.
      const archive = p.getByRole('button', { name: 'Archive' }).first();
      assert.match(await deniedReason(archive), /viewer.*project:delete/);
      await page.check('viewer projects');

      await page.visit(`/orgs/${fx.orgId}/projects/${fx.projectId}/overview`, 'Storefront');
      await noWriteControls(page, 'project overview');
      await page.check('viewer project overview');

      await page.visit(`/orgs/${fx.orgId}/projects/${fx.projectId}/config`, 'Configuration');
      await p.getByTestId('empty').waitFor();
      await noWriteControls(page, 'configuration');
      await page.check('viewer configuration');

      await page.visit(`/orgs/${fx.orgId}/members`, 'Members');
      await p.getByRole('table', { name: 'Members' }).getByText(fx.viewer.email).waitFor();
      await noWriteControls(page, 'members');
      await page.check('viewer members');

      await page.visit(`/orgs/${fx.orgId}/settings`, 'Organization settings');
      await noWriteControls(page, 'organization settings');
      await page.check('viewer organization settings');

      await page.visit(`/orgs/${fx.orgId}/audit-logs`, 'Audit log');
      await page.check('viewer audit log');

      // The API decides: a write from the console's session is refused.
      const refused = await page.allowErrors(/status of 403/, () =>
        page.api('POST', `/api/v1/organizations/${fx.orgId}/projects`, { name: 'Sneaky' }),
      );
      assert.equal(refused.status, 403);
      assert.equal(refused.body.title, 'Permission denied');
      assert.match(refused.body.requestId, /.+/);
      const reveal = await page.allowErrors(/status of 403/, () => page.api('PATCH', `/api/v1/projects/${fx.projectId}`, { name: 'Renamed' }));
      assert.equal(reveal.status, 403);
      page.assertClean('viewer walk');
    } finally {
      await page.close();
    }
  });
}
