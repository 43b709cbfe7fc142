// Renders ckprof report pages in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) and checks what a reader sees:
//   - the page logs no console error and throws no page error, and asks for nothing over the
//     network (it must be self-contained);
//   - each chart (<svg data-chart=...>) is there, has a size, and drew: its region of the
//     screenshot holds coloured marks (bars, points, lines), not only background, axes and text;
//   - a large report (--big) loads, charts present, within --max-load-ms (2000).
// It first proves that it can fail: a copy of the report with one chart emptied and a copy with
// a throwing script must both be flagged.
//
//   node browser_test.mjs --report example.html [--big big.html] [--screenshot out.png]
// Exit 0: all good; 1: a check failed (each failure is printed); 77: Chromium is missing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';

const CHARTS = ['verdict', 'problems', 'roofline', 'timeline'];

function parseArgs(argv) {
  const o = { maxLoadMs: 2000, chromium: process.env.CHROMIUM || '/usr/bin/chromium' };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--report') o.report = next();
    else if (a === '--big') o.big = next();
    else if (a === '--screenshot') o.screenshot = next();
    else if (a === '--max-load-ms') o.maxLoadMs = Number(next());
    else if (a === '--chromium') o.chromium = next();
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.report) throw new Error('--report FILE is required');
  return o;
}

// Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are).
function decodePng(buf) {
  if (buf.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let off = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const type = buf.toString('ascii', off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8], colour = data[9], interlace = data[12];
      if (depth !== 8 || interlace !== 0 || (colour !== 2 && colour !== 6)) {
        throw new Error(`unsupported PNG (depth ${depth}, colour ${colour})`);
      }
      channels = colour === 6 ? 4 : 3;
    } else if (type === 'IDAT') {
      idat.push(data);
    } else if (type === 'IEND') {
      break;
    }
    off += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const px = Buffer.alloc(stride * height);
  for (let y = 0; y < height; ++y) {
    const filter = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = px.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? px.subarray((y - 1) * stride, y * stride) : null;
    for (let x = 0; x < stride; ++x) {
      const a = x >= channels ? row[x - channels] : 0;
      const b = prev ? prev[x] : 0;
      const c = prev && x >= channels ? prev[x - channels] : 0;
      let v = src[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      row[x] = v & 0xff;
    }
  }
  return { width, height, channels, px };
}

// Of a screenshot: the share of pixels that are coloured (saturated: bars, points, roof
// lines), and of those that differ from the white background at all.
function inkOf(png) {
  const { width, height, channels, px } = decodePng(png);
  let coloured = 0, ink = 0;
  for (let i = 0; i < width * height; ++i) {
    const r = px[i * channels], g = px[i * channels + 1], b = px[i * channels + 2];
    const max = Math.max(r, g, b), min = Math.min(r, g, b);
    if (max - min > 40) ++coloured;
    if (min < 235) ++ink;
  }
  const n = Math.max(1, width * height);
  return { coloured: coloured / n, ink: ink / n, width, height };
}

// Loads one page; returns { failures, loadMs, page } (the page stays open for the caller).
async function load(browser, file, failures) {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error') failures.push(`${path.basename(file)}: console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => failures.push(`${path.basename(file)}: page error: ${e.message}`));
  const url = 'file://' + path.resolve(file);
  await page.route('**/*', (route) => {
    const u = route.request().url();
    if (u === url || u.startsWith('data:')) return route.continue();
    failures.push(`${path.basename(file)}: asks for ${u} (the report must be self-contained)`);
    return route.abort();
  });
  const t0 = performance.now();
  await page.goto(url, { waitUntil: 'load' });
  const loadMs = performance.now() - t0;
  return { page, loadMs };
}

// The checks of one report's charts; failures are pushed, not thrown.
async function checkCharts(page, name, failures) {
  const results = {};
  for (const chart of CHARTS) {
    const el = await page.$(`svg[data-chart="${chart}"]`);
    if (!el) {
      failures.push(`${name}: no ${chart} chart (svg[data-chart="${chart}"])`);
      continue;
    }
    const box = await el.boundingBox();
    if (!box || box.width < 100 || box.height < 40) {
      failures.push(`${name}: the ${chart} chart has no size (${JSON.stringify(box)})`);
      continue;
    }
    const ink = inkOf(await el.screenshot());
    results[chart] = ink;
    // A chart that drew has coloured marks; an empty one is white with at most grey text.
    if (ink.coloured < 0.002) {
      failures.push(
        `${name}: the ${chart} chart looks blank (${(ink.coloured * 100).toFixed(3)}% coloured ` +
          `pixels in its ${ink.width}x${ink.height} region)`);
    }
  }
  return results;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(o.chromium)) {
    console.log(`SKIP: no Chromium at ${o.chromium} (apt-get install chromium)`);
    process.exit(77);
  }
  const browser = await chromium.launch({
    executablePath: o.chromium,
    args: ['--no-sandbox', '--disable-gpu', '--font-render-hinting=none'],
  });
  const failures = [];
  try {
    // 1. The report itself.
    const { page } = await load(browser, o.report, failures);
    const inks = await checkCharts(page, path.basename(o.report), failures);
    for (const [chart, ink] of Object.entries(inks)) {
      console.log(`chart ${chart}: ${ink.width}x${ink.height} px, ` +
                  `${(ink.coloured * 100).toFixed(2)}% coloured, ${(ink.ink * 100).toFixed(1)}% ink`);
    }
    if (o.screenshot) {
      await page.emulateMedia({ media: 'screen' });
      await page.screenshot({ path: o.screenshot, fullPage: true });
      console.log(`screenshot: ${o.screenshot}`);
    }
    // Printing: the print stylesheet applies and the charts survive it.
    await page.emulateMedia({ media: 'print' });
    await checkCharts(page, path.basename(o.report) + ' (print)', failures);
    await page.close();

    // 2. The test can fail: an emptied chart and a throwing script are caught.
    const html = fs.readFileSync(o.report, 'utf8');
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ckprof-report-'));
    const emptied = html.replace(/(<svg data-chart="roofline"[^>]*>)[\s\S]*?<\/svg>/, '$1</svg>');
    const throwing = html.replace('</body>', '<script>throw new Error("planted")</script></body>');
    for (const [what, text, expect] of [
      ['an emptied roofline chart', emptied, /roofline chart looks blank/],
      ['a throwing script', throwing, /page error: planted/],
    ]) {
      const file = path.join(tmp, 'broken.html');
      fs.writeFileSync(file, text);
      const found = [];
      const { page: p } = await load(browser, file, found);
      await checkCharts(p, 'broken.html', found);
      await p.close();
      if (!found.some((f) => expect.test(f))) {
        failures.push(`self-check: ${what} was not caught (found: ${JSON.stringify(found)})`);
      } else {
        console.log(`self-check: ${what} is caught`);
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });

    // 3. A large report loads quickly, its charts present.
    if (o.big) {
      const { page: p, loadMs } = await load(browser, o.big, failures);
      const charts = await p.$$eval('svg[data-chart]', (els) => els.map((e) => e.dataset.chart));
      const rows = await p.$$eval('#problems ~ div.scroll tbody tr', (els) => els.length);
      console.log(`big report: loaded in ${loadMs.toFixed(0)} ms, charts ${charts.join(',')}, ` +
                  `${rows} problem rows, ${fs.statSync(o.big).size} bytes`);
      if (loadMs > o.maxLoadMs) {
        failures.push(`big report: loaded in ${loadMs.toFixed(0)} ms (limit ${o.maxLoadMs} ms)`);
      }
      for (const c of CHARTS) {
        if (!charts.includes(c)) failures.push(`big report: no ${c} chart`);
      }
      await p.close();
    }
  } finally {
    await browser.close();
  }
  for (const f of failures) console.log(`FAIL: ${f}`);
  console.log(failures.length ? `${failures.length} failure(s)` : 'all browser checks passed');
  process.exit(failures.length ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
