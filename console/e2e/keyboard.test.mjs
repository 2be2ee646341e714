// The console with the keyboard alone (issue 26), at 1280 and 390 px: after signing in, the
// owner of the fixture organization creates an organization and a project, moves through the
// navigation, and adds a configuration entry in a dialog, with Tab, Shift+Tab, typing, Enter and
// Escape only. No mouse event is sent after sign-in: a control that cannot be reached or worked
// from the keyboard fails the test.
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

/**
 * tabTo presses Tab until the locator has the focus (at most 60 times), and fails naming the
 * control when it never does.
 */
async function tabTo(p, locator, what) {
  for (let i = 0; i < 60; i++) {
    if (await locator.evaluate((el) => el === document.activeElement).catch(() => false)) return;
    await p.keyboard.press('Tab');
  }
  assert.fail(`${what}: not reachable with Tab`);
}

for (const width of widths) {
  test(`keyboard alone at ${width} px`, async () => {
    const page = await Page.open(browser, width);
    const p = page.page;
    try {
      await page.signIn(fx.owner.email, fx.owner.password);
      await page.visit('/organizations', 'Organizations');

      // Create an organization: a form field and its submit button.
      const orgName = `Keyboard Co ${width}`;
      await tabTo(p, p.getByLabel('Name', { exact: false }).first(), 'organization name');
      await p.keyboard.type(orgName);
      await tabTo(p, p.getByRole('button', { name: 'Create organization' }), 'Create organization');
      await p.keyboard.press('Enter');
      await p.waitForURL(/\/console\/orgs\/org_[^/]+\/projects/);
      await page.heading('Projects');

      // Create a project.
      await tabTo(p, p.getByLabel('Project name'), 'project name');
      await p.keyboard.type('Keyboard shop');
      await tabTo(p, p.getByRole('button', { name: 'Create project' }), 'Create project');
      await p.keyboard.press('Enter');
      await p.waitForURL(/\/projects\/prj_[^/]+\/overview$/);
      await page.heading('Keyboard shop');

      // The navigation: at phone width the menu opens from its toggle, with Enter.
      const burger = p.getByRole('button', { name: 'Toggle navigation' });
      if (await burger.isVisible()) {
        await tabTo(p, burger, 'the navigation toggle');
        await p.keyboard.press('Enter');
      }
      const link = p.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Configuration', exact: true });
      await tabTo(p, link, 'the Configuration link');
      await p.keyboard.press('Enter');
      await page.heading('Configuration');

      // A dialog: opened with Enter, filled, submitted with Enter, and the new row is listed.
      await tabTo(p, p.getByRole('button', { name: 'Add entry' }), 'Add entry');
      await p.keyboard.press('Enter');
      const dialog = p.getByRole('dialog', { name: 'Add an entry' });
      await dialog.waitFor();
      await tabTo(p, dialog.getByLabel('Key'), 'the entry key');
      await p.keyboard.type('KEYBOARD_FLAG');
      await tabTo(p, dialog.getByLabel('Value', { exact: true }), 'the entry value');
      await p.keyboard.type('on');
      await tabTo(p, dialog.getByRole('button', { name: 'Add entry' }), 'the dialog submit');
      await p.keyboard.press('Enter');
      await dialog.waitFor({ state: 'hidden' });
      await p.getByRole('table', { name: 'Configuration entries' }).getByText('KEYBOARD_FLAG').waitFor();

      // Escape closes a dialog without writing.
      await tabTo(p, p.getByRole('button', { name: 'Add entry' }), 'Add entry (again)');
      await p.keyboard.press('Enter');
      await dialog.waitFor();
      await p.keyboard.press('Escape');
      await dialog.waitFor({ state: 'hidden' });
      page.assertClean('keyboard walk');
    } finally {
      await page.close();
    }
  });
}
