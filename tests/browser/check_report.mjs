// Loads a `twin report` page in headless Chromium (Debian's, driven by playwright-core) as a
// person would see it: fails on any console error or page error, on a chart that did not render,
// and on a chart without marks; saves a full-page screenshot.
// Usage: node tests/browser/check_report.mjs REPORT.html SCREENSHOT.png
import { createRequire } from 'node:module';
import path from 'node:path';
import url from 'node:url';

const here = path.dirname(url.fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../reports/web/package.json'));
const { chromium } = require('playwright-core');

const [page_file, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on('console', m => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
  page.on('pageerror', e => problems.push('page error: ' + e.message));
  page.on('request', r => { if (!r.url().startsWith('file:')) problems.push('network request: ' + r.url()); });
  await page.goto(url.pathToFileURL(path.resolve(page_file)).href);
  try {
    await page.waitForFunction(() => window.twinCharts &&
        window.twinCharts.rendered + window.twinCharts.errors.length >= window.twinCharts.total, null, { timeout: 60000 });
  } catch (e) {
    problems.push('charts did not finish rendering: ' + e.message.split('\n')[0]);
  }
  const state = await page.evaluate(() => {
    const charts = [...document.querySelectorAll('.chart')].map(el => ({
      id: el.id,
      rendered: el.dataset.rendered === '1',
      // Data marks only: Vega draws each data mark's items in a group of class role-mark (axes,
      // legends and titles have their own roles), so a chart with no data has none.
      marks: el.querySelectorAll('svg g.role-mark > *').length,
    }));
    const t = window.twinCharts || { total: 0, errors: ['the page script did not run'] };
    return { total: t.total, errors: t.errors, charts };
  });
  problems.push(...state.errors.map(e => 'chart error: ' + e));
  if (state.total === 0) problems.push('no charts on the page');
  for (const c of state.charts) {
    if (!c.rendered) problems.push(`${c.id}: not rendered`);
    else if (c.marks === 0) problems.push(`${c.id}: empty (no marks)`);
  }
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  console.log(`${state.charts.length} charts: ` + state.charts.map(c => `${c.id} ${c.marks} marks`).join(', '));
} finally {
  await browser.close();
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
