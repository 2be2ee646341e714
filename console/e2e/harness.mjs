// The console's browser-test harness: playwright-core driving Debian's Chromium against the
// real server that the Go test (e2e/console_browser_test.go) starts. Every console page (under
// /console/) fails its test on a console error, an uncaught exception or a request to another origin; checkA11y runs
// axe-core (the root package.json's pinned copy) and fails on serious or critical violations.
//
// Environment (set by the Go test):
//   GATEHOUSE_URL            the server's base URL (http://127.0.0.1:port)
//   GATEHOUSE_E2E_FIXTURES   JSON: users and ids the Go test seeded (see fixtures())
//   GATEHOUSE_E2E_SHOTS      a folder for screenshots (optional)
import { readFileSync, mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';

export const base = process.env.GATEHOUSE_URL ?? 'http://127.0.0.1:8080';
export const widths = [1280, 390];
const axeSource = readFileSync(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');
const shots = process.env.GATEHOUSE_E2E_SHOTS;

/** The reason every gated control gives while the member's permissions load (api/permissions.ts). */
const checkingPermissions = 'Checking your permissions…';

/**
 * deniedReason returns the reason a disabled control gives (its aria-description) once the
 * member's permissions have loaded (within 10 s); until then it reads "Checking your
 * permissions…", and a test that read it at once would race the permissions query.
 */
export async function deniedReason(control) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const reason = (await control.getAttribute('aria-description')) ?? '';
    if (reason !== checkingPermissions || Date.now() > deadline) return reason;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The users and ids the Go test seeded. */
export function fixtures() {
  return JSON.parse(process.env.GATEHOUSE_E2E_FIXTURES ?? '{}');
}

/** launch starts Chromium offline: nothing but the server's host resolves. */
export async function launch() {
  const host = new URL(base).hostname;
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE ${host}`,
    ],
  });
}

/**
 * Page wraps a Playwright page at one width with the checks every view needs. allowErrors
 * lets a step expect a console error it causes on purpose (a refused call logs one).
 */
export class Page {
  constructor(page, width) {
    this.page = page;
    this.width = width;
    this.errors = [];
    this.allowed = [];
    page.on('console', (m) => {
      // The console's own pages; the hosted sign-in pages have their own tests.
      if (!new URL(page.url()).pathname.startsWith('/console/')) return;
      const text = `${m.text()} (${m.location()?.url ?? ''})`;
      if (m.type() === 'error' && !this.allowed.some((re) => re.test(text))) this.errors.push(`console: ${text}`);
    });
    page.on('pageerror', (e) => this.errors.push(`exception: ${e.message}`));
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (!['data:', 'blob:'].includes(u.protocol) && u.origin !== new URL(base).origin) this.errors.push(`other origin: ${r.url()}`);
    });
  }

  static async open(browser, width) {
    const context = await browser.newContext({ viewport: { width, height: 900 }, baseURL: base });
    return new Page(await context.newPage(), width);
  }

  /** allowErrors runs fn while console errors matching re are expected. */
  async allowErrors(re, fn) {
    this.allowed.push(re);
    try {
      return await fn();
    } finally {
      this.allowed.pop();
    }
  }

  /** assertClean fails on any console error, exception or other-origin request so far. */
  assertClean(where) {
    assert.deepEqual(this.errors, [], `${where} at ${this.width} px`);
  }

  /** signIn goes to the console signed out, is sent to the hosted sign-in page, and signs in. */
  async signIn(email, password, path = '/console/') {
    const p = this.page;
    await p.goto(path);
    await p.waitForURL(/\/api\/auth\/sign-in\?/);
    await p.fill('#email', email);
    await p.fill('#password', password);
    await Promise.all([p.waitForURL((u) => u.pathname.startsWith('/console/')), p.click('button[type=submit]')]);
    await this.shell();
  }

  /** shell waits for the app shell (the user menu) to render. */
  async shell() {
    await this.page.getByTestId('user-menu').waitFor();
  }

  /** visit opens a console path and waits for its heading (a level-1 heading with that name). */
  async visit(path, heading) {
    await this.page.goto(path.startsWith('/console') ? path : '/console' + path);
    await this.heading(heading);
  }

  async heading(name) {
    await this.page.getByRole('heading', { level: 1, name }).waitFor();
  }

  /** nav clicks a side-navigation link (opening the menu first at phone width). */
  async nav(label) {
    const p = this.page;
    const burger = p.getByRole('button', { name: 'Toggle navigation' });
    if (await burger.isVisible()) await burger.click();
    await p.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: label, exact: true }).click();
  }

  /**
   * check runs the per-view checks: axe-core (no serious or critical violation), nothing
   * sideways-scrolling at phone width, no console error; and takes a screenshot.
   */
  async check(name) {
    const p = this.page;
    await p.waitForLoadState('networkidle');
    await p.mouse.move(0, 0); // judge the resting state, not a hover
    // Let transitions (a dialog fading out) finish: axe judges colours mid-fade otherwise.
    await p.waitForFunction(() => document.getAnimations().every((a) => a.playState !== 'running'));
    if (!(await p.evaluate(() => typeof window.axe !== 'undefined'))) await p.evaluate(axeSource);
    const violations = await p.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    });
    assert.deepEqual(violations, [], `axe on ${name} at ${this.width} px`);
    if (this.width <= 400) {
      const sw = await p.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(sw <= this.width, `${name} scrolls sideways at ${this.width} px (scrollWidth ${sw})`);
    }
    this.assertClean(name);
    if (shots) {
      mkdirSync(shots, { recursive: true });
      await p.screenshot({ path: `${shots}/${name.replace(/[^a-z0-9]+/gi, '-')}-${this.width}.png`, fullPage: true });
    }
  }

  /** api calls the API from the console's own session (cookie, same-origin Origin) in the page. */
  async api(method, path, body) {
    return this.page.evaluate(
      async ([method, path, body]) => {
        const r = await fetch(path, {
          method,
          credentials: 'same-origin',
          headers: body ? { 'Content-Type': 'application/json' } : {},
          body: body ? JSON.stringify(body) : undefined,
        });
        return { status: r.status, body: await r.json().catch(() => null) };
      },
      [method, path, body],
    );
  }

  async close() {
    await this.page.context().close();
  }
}
