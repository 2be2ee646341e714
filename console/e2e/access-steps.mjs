// Steps for a project's service accounts, access control and OIDC clients (issue 26), written
// as functions of the walk's state so that the operator's day (operator-day.test.mjs) can
// append them in the day's order: accessSteps() needs w.state.orgId and w.state.projectId and
// leaves w.state.apiKey, w.state.accountId, w.state.roleId, w.state.clientId behind.
// access.test.mjs runs them on the seeded "Viewer Co" project, and checks the viewer's pages.
import assert from 'node:assert/strict';
import { base } from './harness.mjs';

const projectPath = (w, area) => `/orgs/${w.state.orgId}/projects/${w.state.projectId}/${area}`;

/** ingest sends one usage event with the API key, as a product service would (not the browser). */
export async function ingest(w, key) {
  const r = await fetch(`${base}/api/v1/projects/${w.state.projectId}/usage-events`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': key },
    body: JSON.stringify({
      eventId: `evt-${w.width}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
      subjectId: `subject-${w.width}`,
      environmentId: w.state.environmentId,
      meter: 'api_call',
      quantity: 1,
    }),
  });
  return r.status;
}

/** pick opens a Mantine Select (a combobox) by its label and clicks an option. */
async function pick(p, label, option) {
  await p.getByRole('combobox', { name: label }).click();
  await p.getByRole('option', { name: option, exact: true }).click();
}

export function accessSteps() {
  return [
    [
      'create a service account and copy its key',
      async (w) => {
        const p = w.page.page;
        await p.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
        if (!w.state.environmentId) {
          const prj = await w.page.api('GET', `/api/v1/projects/${w.state.projectId}`);
          assert.equal(prj.status, 200);
          w.state.environmentId = prj.body.data.environments.find((e) => e.name === 'production').id;
        }
        await w.page.visit(projectPath(w, 'service-accounts'), 'Service accounts');
        await w.page.check('service accounts');
        // The form validates as the spec does before sending: no scope is refused beside the field.
        const name = `ingest-${w.width}`;
        await p.getByRole('textbox', { name: 'Name', exact: false }).first().fill(name);
        await p.getByRole('button', { name: 'Create service account' }).click();
        await p.getByText('Pick at least one scope').waitFor();
        await pick(p, 'Environment', 'production');
        await p.getByRole('combobox', { name: 'Scopes' }).fill('usage:wr');
        await p.getByRole('option', { name: 'usage:write', exact: true }).click();
        await p.keyboard.press('Escape');
        await p.getByRole('button', { name: 'Create service account' }).click();
        const shown = p.getByTestId('created-account');
        await shown.waitFor();
        await shown.getByText('API key: shown once').waitFor();
        const key = (await shown.getByTestId('secret-value').innerText()).trim();
        assert.match(key, /^svc_sk_[A-Za-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
        await shown.getByRole('button', { name: 'Copy api key' }).click();
        await shown.getByRole('button', { name: 'Copied' }).waitFor();
        assert.equal(await p.evaluate(() => navigator.clipboard.readText()), key, 'the copy button copies the key');
        w.state.apiKey = key;
        await w.page.check('service account created (key shown once)');
        const row = p.getByRole('row').filter({ has: p.getByRole('link', { name }) });
        await row.getByText('production').waitFor();
        await row.getByRole('link', { name }).click();
        await w.page.heading(`Service account ${name}`);
        w.state.accountId = p.url().match(/service-accounts\/(sa_[^/?]+)/)[1];
        assert.equal(await p.getByTestId('secret-value').count(), 0, 'the key is not shown again');
        await w.page.check('service account page');
      },
    ],
    [
      'use the key: ingest a usage event',
      async (w) => {
        assert.equal(await ingest(w, w.state.apiKey), 201);
      },
    ],
    [
      'create a role and a binding, get allow and deny in the playground',
      async (w) => {
        const p = w.page.page;
        await w.page.visit(projectPath(w, 'rbac'), 'Access control');
        await w.page.check('access control: roles');
        const roleName = `Editor ${w.width}`;
        const slug = `editor-${w.width}`;
        await p.getByRole('textbox', { name: 'Name', exact: false }).first().fill(roleName);
        const perms = p.getByRole('combobox', { name: 'Permissions' });
        await perms.fill('Document:Write');
        await perms.press('Enter');
        await p.getByRole('button', { name: 'Create role' }).click();
        await p.getByText('Document:Write: resource:action in lower case, or *').waitFor();
        await perms.press('Backspace');
        await perms.fill('document:write');
        await perms.press('Enter');
        await perms.fill('document:read');
        await perms.press('Enter');
        await p.getByRole('button', { name: 'Create role' }).click();
        const roleRow = p.getByRole('row').filter({ hasText: slug });
        await roleRow.getByText('document:write').waitFor();
        await w.page.check('access control: role created');

        await p.getByRole('tab', { name: 'Bindings' }).click();
        await p.getByRole('heading', { name: 'Bind a role' }).waitFor();
        await w.page.check('access control: bindings');
        await pick(p, 'Role', `${roleName} (${slug})`);
        const principal = `user-${w.width}`;
        await p.getByRole('combobox', { name: 'Principal id' }).fill(principal);
        await p.getByRole('button', { name: 'Create binding' }).click();
        await p.getByRole('row').filter({ hasText: principal }).filter({ hasText: slug }).waitFor();
        // A second identical binding is the API's 409, shown with its title.
        await w.page.allowErrors(/409/, async () => {
          await pick(p, 'Role', `${roleName} (${slug})`);
          await p.getByRole('combobox', { name: 'Principal id' }).fill(principal);
          await p.getByRole('button', { name: 'Create binding' }).click();
          await p.getByTestId('problem').getByText('HTTP 409', { exact: false }).waitFor();
        });

        await p.getByRole('tab', { name: 'Playground' }).click();
        await p.getByRole('heading', { name: 'Authorize playground' }).waitFor();
        await p.getByRole('textbox', { name: 'Principal id' }).fill(principal);
        await p.getByRole('textbox', { name: 'Permission' }).fill('document:write');
        await p.getByRole('button', { name: 'Decide', exact: true }).click();
        const d = p.getByTestId('decision');
        await d.getByTestId('decision-result').getByText('Allowed').waitFor();
        await d.getByTestId('granted-by').getByRole('cell', { name: slug, exact: true }).waitFor();
        assert.match(await d.innerText(), /dec_[0-9A-Za-z]+/);
        await w.page.check('playground: allowed');
        await p.getByRole('textbox', { name: 'Permission' }).fill('document:delete');
        await p.getByRole('button', { name: 'Decide', exact: true }).click();
        await d.getByTestId('decision-result').getByText('Denied').waitFor();
        await d.getByTestId('deny-reason').getByText('permission_not_granted').waitFor();
        await d.getByTestId('considered').getByRole('cell', { name: slug, exact: true }).waitFor();
        await p.getByRole('button', { name: 'Effective permissions' }).click();
        await p.getByTestId('effective').getByText('document:read').waitFor();
        await w.page.check('playground: denied, explained');
      },
    ],
    [
      'register an OIDC client and see its secret once',
      async (w) => {
        const p = w.page.page;
        await w.page.visit(projectPath(w, 'oidc-clients'), 'OIDC clients');
        await w.page.check('oidc clients');
        const name = `Storefront web ${w.width}`;
        await p.getByRole('textbox', { name: 'Name', exact: false }).first().fill(name);
        const redirects = p.getByRole('textbox', { name: 'Redirect URIs', exact: false }).first();
        await redirects.fill('http://shop.example.com/callback');
        await p.getByRole('button', { name: 'Register client' }).click();
        await p.getByText('Item 1: Must be https').waitFor();
        await redirects.fill('https://shop.example.com/callback');
        await p.getByRole('checkbox', { name: 'offline_access' }).check();
        await p.getByRole('button', { name: 'Register client' }).click();
        const shown = p.getByTestId('created-client');
        await shown.getByText('Client secret: shown once').waitFor();
        const secret = (await shown.getByTestId('secret-value').innerText()).trim();
        assert.match(secret, /^[A-Za-z0-9_-]{43}$/);
        await w.page.check('oidc client registered (secret shown once)');
        await p.getByRole('link', { name }).click();
        await w.page.heading(`OIDC client ${name}`);
        w.state.clientId = p.url().match(/oidc-clients\/(cli_[^/?]+)/)[1];
        assert.equal(await p.getByTestId('secret-value').count(), 0, 'the secret is not shown again');
        await p.getByText('https://shop.example.com/callback').waitFor();
        await w.page.check('oidc client page');
        // Change the registration: a second redirect URI and PAR.
        await p.getByRole('button', { name: 'Edit registration' }).click();
        const dialog = p.getByRole('dialog');
        await dialog.getByRole('textbox', { name: 'Redirect URIs', exact: false }).first().fill('https://shop.example.com/callback\nhttps://shop.example.com/callback-v2');
        await dialog.getByRole('switch', { name: 'Require pushed authorization requests (PAR)' }).check();
        await w.page.check('oidc client: edit registration');
        await dialog.getByRole('button', { name: 'Save registration' }).click();
        await dialog.waitFor({ state: 'detached' });
        await p.getByText('https://shop.example.com/callback-v2').waitFor();
        await p.getByRole('row', { name: /Require PAR\s*yes/ }).waitFor();
        // Disable and enable, each confirmed.
        await p.getByRole('button', { name: 'Disable client' }).click();
        await p.getByRole('dialog').getByRole('button', { name: 'Disable', exact: true }).click();
        await p.getByText('Disabled since', { exact: false }).waitFor();
        await p.getByRole('button', { name: 'Enable client' }).click();
        await p.getByRole('dialog').getByRole('button', { name: 'Enable', exact: true }).click();
        await p.getByRole('button', { name: 'Disable client' }).waitFor();
        const list = await w.page.api('GET', `/api/v1/projects/${w.state.projectId}/oidc-clients`);
        assert.equal(list.status, 200);
        assert.ok(!JSON.stringify(list.body).includes(secret), 'the list never carries the secret');
      },
    ],
    [
      'revoke the key in the console: the next request with it is 401',
      async (w) => {
        const p = w.page.page;
        await w.page.visit(projectPath(w, `service-accounts/${w.state.accountId}`), /^Service account /);
        const publicId = w.state.apiKey.slice('svc_sk_'.length, 'svc_sk_'.length + 12);
        await p.getByRole('button', { name: `Revoke key ${publicId}` }).click();
        const dialog = p.getByRole('dialog');
        await dialog.getByText('This cannot be undone.', { exact: false }).waitFor();
        await w.page.check('service account: revoke confirmation');
        await dialog.getByRole('button', { name: 'Revoke key' }).click();
        await dialog.waitFor({ state: 'detached' });
        await p.getByRole('row').filter({ hasText: publicId }).getByText('revoked').waitFor();
        assert.equal(await ingest(w, w.state.apiKey), 401);
        await w.page.check('service account: key revoked');
      },
    ],
  ];
}

/**
 * viewerSteps: a viewer of the project sees the same pages without write controls, and a
 * write sent from the console's session is refused with 403.
 */
export function viewerSteps() {
  return [
    [
      'viewer: service accounts without write controls',
      async (w) => {
        const p = w.page.page;
        await w.page.visit(projectPath(w, 'service-accounts'), 'Service accounts');
        await p.getByTestId('create-denied').getByText('lacks credential:manage').waitFor();
        assert.equal(await p.getByRole('button', { name: 'Create service account' }).count(), 0);
        await w.page.check('viewer: service accounts');
        const r = await w.page.allowErrors(/403/, () =>
          w.page.api('POST', `/api/v1/projects/${w.state.projectId}/service-accounts`, { name: 'nope', scopes: ['config:read'] }),
        );
        assert.equal(r.status, 403);
        assert.equal(r.body.title, 'Permission denied');
      },
    ],
    [
      'viewer: access control without write controls',
      async (w) => {
        const p = w.page.page;
        await w.page.visit(projectPath(w, 'rbac'), 'Access control');
        await p.getByTestId('create-denied').getByText('lacks project:update').waitFor();
        const del = p.getByRole('button', { name: 'Delete role member' });
        await del.waitFor();
        assert.equal(await del.getAttribute('aria-disabled'), 'true');
        assert.equal(await p.getByRole('button', { name: 'Edit role member' }).getAttribute('aria-disabled'), 'true');
        await w.page.check('viewer: access control');
        await p.getByRole('tab', { name: 'Bindings' }).click();
        await p.getByTestId('create-denied').getByText('lacks project:update').waitFor();
        await w.page.check('viewer: bindings');
      },
    ],
    [
      'viewer: OIDC clients without write controls',
      async (w) => {
        const p = w.page.page;
        await w.page.visit(projectPath(w, 'oidc-clients'), 'OIDC clients');
        await p.getByTestId('create-denied').getByText('lacks credential:manage').waitFor();
        assert.equal(await p.getByRole('button', { name: 'Register client' }).count(), 0);
        await w.page.check('viewer: oidc clients');
      },
    ],
  ];
}
